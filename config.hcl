# The default Switchboard config: the four built-ins, confined to this
# directory. `make run` serves it; see README.md for every setting.

project_dir = "."
# data_dir defaults to $XDG_STATE_HOME/switchboard/<id of this config>.

builtin "filesystem" {}

builtin "bash" {
  timeout = "2m"
}

builtin "git" {}

builtin "web" {}

# Every server runs in a kernel sandbox (README, Security); a block widens or
# narrows it, e.g. builtin "bash" { sandbox { network = true } }.

# Third-party plugins:
# plugin "hello" {
#   path   = "bin/switchboard-plugin-hello"
#   env    = { GREETING = "Hi" }
#   sha256 = "..."          # optional pin, checked before every start
# }

permissions {
  default = "allow"                 # or "deny": only calls matching allow run
  deny    = ["bash.run:rm", "bash.start:rm", "bash.*:sudo"]   # bash patterns are every command a line would run
  access  = "write"                 # "read": only READ tools are listed and callable
}
