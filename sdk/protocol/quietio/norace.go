//go:build linux && !race

package quietio

func raceBeforeWrite([]byte) {}

func raceAfterRead([]byte) {}
