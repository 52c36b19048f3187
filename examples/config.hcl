# Switchboard with the four built-ins and the example hello plugin.
# Run from the repository root after `make build`:
#   bin/switchboard call --config examples/config.hcl hello.greet '{"name":"Ada"}'

project_dir = ".."

builtin "filesystem" {}
builtin "bash" {
  timeout = "2m"
}
builtin "git" {}
builtin "web" {}

plugin "hello" {
  path = "../bin/switchboard-plugin-hello"
  env  = { GREETING = "Hello" }
}
