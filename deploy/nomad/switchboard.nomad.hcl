# Nomad: replicas of `switchboard serve --http` in Docker, the same config
# as the Kubernetes ConfigMap (make deploy-check checks they are equal),
# the store's connection string and the tokens from the Nomad variable
# nomad/jobs/switchboard (keys store_dsn and tokens_json):
#   nomad var put nomad/jobs/switchboard store_dsn='postgres://…' tokens_json=@tokens.json
#   nomad job run deploy/nomad/switchboard.nomad.hcl
job "switchboard" {
  type = "service"

  group "switchboard" {
    count = 2

    network {
      port "http" {
        to = 8765
      }
    }

    service {
      name     = "switchboard"
      port     = "http"
      provider = "nomad"

      check {
        name     = "alive"
        type     = "http"
        path     = "/healthz"
        interval = "10s"
        timeout  = "3s"
      }

      # Ready while the shared store answers.
      check {
        name     = "ready"
        type     = "http"
        path     = "/readyz"
        interval = "5s"
        timeout  = "3s"
      }
    }

    update {
      max_parallel     = 1
      health_check     = "checks"
      min_healthy_time = "10s"
      auto_revert      = true
    }

    task "switchboard" {
      driver = "docker"
      user   = "65532:65532"
      # Longer than the config's shutdown_grace: calls in flight finish.
      kill_timeout = "30s"

      config {
        image           = "ghcr.io/switchboard-mcp/switchboard:latest"
        ports           = ["http"]
        readonly_rootfs = true
        args            = ["serve", "--config", "/local/config.hcl", "--http", "0.0.0.0:8765", "--allow-remote"]

        # data_dir's parent and /tmp: tmpfs, mode 1777 (sticky), per
        # replica; the host makes data_dir inside it, 0700.
        mount {
          type   = "tmpfs"
          target = "/var/lib/switchboard"
          tmpfs_options {
            size = 268435456
          }
        }
        mount {
          type   = "tmpfs"
          target = "/tmp"
          tmpfs_options {
            size = 67108864
          }
        }
      }

      env {
        SWITCHBOARD_PROJECT_DIR = "/alloc/data"
        SWITCHBOARD_TOKENS_FILE = "/secrets/tokens.json"
      }

      template {
        destination = "local/config.hcl"
        change_mode = "restart"
        data        = <<-EOT
          # Switchboard for a team: every replica runs this config. The state the
          # replicas share (saved "always" answers, the audit log) lives in
          # PostgreSQL; its connection string comes from the Secret.
          project_dir   = env("SWITCHBOARD_PROJECT_DIR") # set by the Deployment or the Nomad job
          data_dir      = "/var/lib/switchboard/state" # the host makes it, 0700
          log_format    = "json"
          audit_durable = true

          # Containers usually refuse user namespaces: Landlock, rlimits and
          # no_new_privs still confine every plugin.
          builtin "filesystem" {
            sandbox { mode = "best-effort" }
          }
          builtin "web" {
            sandbox { mode = "best-effort" }
          }

          permissions {
            default = "ask"
            allow   = ["filesystem.read_*", "filesystem.list_*", "filesystem.search_*", "web.*"]
          }

          store {
            postgres = env("SWITCHBOARD_STORE_DSN")
          }

          # With authentication (README, "Run it for a team"), the static tokens
          # come from the Secret (Kubernetes) or a Nomad variable; the Deployment
          # and the Nomad job set SWITCHBOARD_TOKENS_FILE to where they are:
          # auth { tokens_file = env("SWITCHBOARD_TOKENS_FILE") }
        EOT
      }

      template {
        destination = "secrets/store.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/switchboard" }}SWITCHBOARD_STORE_DSN={{ .store_dsn }}{{ end }}
        EOT
      }

      template {
        destination = "secrets/tokens.json"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/switchboard" }}{{ .tokens_json }}{{ end }}
        EOT
      }

      resources {
        cpu    = 200
        memory = 512
      }
    }
  }
}
