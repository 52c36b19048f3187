// Package validate checks the deployment files in deploy/ (see its test).
package validate
