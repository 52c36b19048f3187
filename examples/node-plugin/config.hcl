# The Node.js example plugin on its own. From the repository root:
#   (cd examples/node-plugin && npm ci)
#   bin/switchboard call --config examples/node-plugin/config.hcl node.greet '{"name":"Ada"}'
# Relative paths resolve against this file's folder.

permissions {
  allow = ["node.*"]
}

plugin "node" {
  path = "switchboard-plugin-node-hello"   # runs the first node on PATH (env NODE picks another)
  env  = { GREETING = "Hello" }
  sandbox {
    # Inside its sandbox a plugin reads the system's folders (/usr: node
    # itself when installed there) and its own binary, here the launcher
    # script. It also needs plugin.js with node_modules, and the .proto;
    # a node outside /usr (nvm, bin/tools) needs its folder here too.
    read = [".", "../../sdk/proto"]
  }
}
