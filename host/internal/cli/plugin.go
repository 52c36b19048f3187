package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/loader"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// pluginCmd is `switchboard plugin`: install, lock, verify, list and
// approve plugin binaries.
func (a *app) pluginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Install, lock, verify and list plugin binaries",
		Args:  cobra.NoArgs,
	}
	approve := a.approveCmd()
	approve.Short = "Same as `switchboard approve NAME`"
	cmd.AddCommand(a.pluginInstallCmd(), a.pluginLockCmd(), a.pluginVerifyCmd(), a.pluginListCmd(), approve)
	return cmd
}

// storeConfig loads the config when its file exists: install works
// without one (default plugin directory, no trusted keys).
func (a *app) storeConfig() (*config.Config, error) {
	path := config.ResolvePath(a.configFlag)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && a.configFlag == "" {
		return nil, nil
	}
	return a.loadConfig()
}

func (a *app) pluginInstallCmd() *cobra.Command {
	var dir, platform string
	cmd := &cobra.Command{
		Use:   "install ARCHIVE|DIR|BINARY",
		Short: "Put a plugin into the plugin directory, checking SHA256SUMS (and its signature when trusted_keys are set)",
		Long: "Install a plugin from a .tar.gz or .zip archive, a folder or a binary. The file must be listed in the\n" +
			"SHA256SUMS file beside it (for a folder: in it); when the config sets trusted_keys, SHA256SUMS.minisig\n" +
			"must be a minisign signature over it by one of them. Binaries go to <dir>/<os>_<arch>/ (the platform\n" +
			"in the archive's name, else this machine's), where the host and `plugin lock` find them.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := a.storeConfig()
			if err != nil {
				return err
			}
			opts := pluginstore.InstallOptions{Root: dir, Platform: platform}
			if cfg != nil {
				if opts.Root == "" {
					opts.Root = cfg.InstallDir
				}
				opts.TrustedKeys = cfg.TrustedKeys
			}
			got, err := pluginstore.Install(args[0], opts)
			if err != nil {
				return fail(1, "not installed: %v", err)
			}
			signed := "checksum verified"
			if len(opts.TrustedKeys) > 0 {
				signed = "checksum and signature verified"
			}
			for _, in := range got {
				fmt.Fprintf(a.stdout, "installed %s %s for %s: %s (%s, %s)\n", in.Name, dashIfEmpty(in.Version), in.Platform, in.Path, in.Hash, signed)
			}
			fmt.Fprintln(a.stdout, "run `switchboard plugin lock` to pin it in "+pluginstore.LockFileName)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "plugin directory root (default: plugin_install_dir, else $XDG_DATA_HOME/switchboard/plugins)")
	cmd.Flags().StringVar(&platform, "platform", "", "install for this <os>_<arch> (default: from the archive's name, else this machine)")
	return cmd
}

// probe starts a plugin once, as the host would, for its protocol version
// and tool surface.
type probe struct {
	version  string
	protocol int // negotiated with this host
	// protocols are every protocol version the plugin says it speaks
	// (its Describe), or the negotiated one when it does not say.
	protocols []int
	surface   pluginstore.Surface
}

func startProbe(ctx context.Context, t loader.PluginTarget, log hclog.Logger) (*probe, error) {
	p, err := launcher.Launch(ctx, t.Spec, log)
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	d := p.Describe()
	pr := &probe{version: d.PluginVersion, protocol: p.ProtocolVersion(), surface: pluginstore.SurfaceOfServer(d)}
	for _, v := range d.ProtocolVersions {
		pr.protocols = append(pr.protocols, int(v))
	}
	if len(pr.protocols) == 0 {
		pr.protocols = []int{pr.protocol}
	}
	slices.Sort(pr.protocols)
	pr.protocols = slices.Compact(pr.protocols)
	if _, v, ok := pluginstore.ParseName(filepath.Base(t.Path)); ok && v != nil {
		pr.version = v.String()
	}
	return pr, nil
}

// platformBinary finds a plugin's binary for another platform in the
// plugin directory layout (<dir>/<os>_<arch>/), preferring the locked
// version's file name.
func platformBinary(cfg *config.Config, name, version, platform string) (string, []string) {
	var dirs []string
	for _, d := range append([]string{cfg.InstallDir}, cfg.PluginDirs...) {
		dirs = append(dirs, filepath.Join(d, platform))
	}
	for _, file := range []string{pluginstore.FileName(name, version), pluginstore.FileName(name, version) + ".exe", pluginstore.FileName(name, ""), pluginstore.FileName(name, "") + ".exe"} {
		for _, d := range dirs {
			p := filepath.Join(d, file)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p, dirs
			}
		}
	}
	return "", dirs
}

func (a *app) selfPath() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	return self
}

func (a *app) pluginLockCmd() *cobra.Command {
	var platforms []string
	cmd := &cobra.Command{
		Use:   "lock [-platform=os_arch ...]",
		Short: "Write " + pluginstore.LockFileName + " beside the config: each plugin's version, protocol, hashes and tool surface",
		Long: "Start every plugin the config loads (plugin blocks and discovered binaries) once, and write\n" +
			pluginstore.LockFileName + " beside the config with its version, the protocol versions it speaks, the SHA-256 of its binary\n" +
			"for this platform and every -platform given (their binaries are found in <dir>/<os>_<arch>/ of\n" +
			"the install directory and plugin_dirs), and the SHA-256 of its tool surface. External servers (external\n" +
			"blocks, approved .mcp.json servers) are started or connected to once too, and locked by the SHA-256 of\n" +
			"their tool surface (they have no binary of ours to hash).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			for _, p := range platforms {
				if !pluginstore.ValidPlatform(p) {
					return fail(2, "-platform=%s is not <os>_<arch> (e.g. %s)", p, pluginstore.Platform())
				}
			}
			launcher.HostVersion = Version
			log := a.logger(cfg, true)
			old, _, err := pluginstore.ReadLock(cfg.LockFile())
			if err != nil {
				return fail(2, "%v", err)
			}
			lock := &pluginstore.Lock{Path: cfg.LockFile(), Plugins: map[string]*pluginstore.Entry{}}
			var problems []string
			for _, t := range loader.PluginTargets(cfg, a.selfPath()) {
				if t.Spec.PinnedBy != "" {
					t.Spec.SHA256, t.Spec.PinnedBy = "", "" // what is there now is what gets locked
				}
				hash, err := pluginstore.FileHash(t.Path)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: cannot read %s: %v", t.Name, t.Path, err))
					continue
				}
				pr, err := startProbe(cmd.Context(), t, log)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: did not start, so it is not locked: %v", t.Name, err))
					if e := old.Plugins[t.Name]; e != nil {
						lock.Plugins[t.Name] = e
					}
					continue
				}
				e := &pluginstore.Entry{Version: pr.version, Protocols: pr.protocols, Hashes: map[string]string{pluginstore.Platform(): hash}, Surface: pr.surface.Hash()}
				// Other platforms' hashes stay while the binary here is the
				// one they were locked with.
				if prev := old.Plugins[t.Name]; prev != nil && prev.Version == e.Version && prev.Hashes[pluginstore.Platform()] == hash {
					for k, v := range prev.Hashes {
						if _, ok := e.Hashes[k]; !ok {
							e.Hashes[k] = v
						}
					}
				}
				for _, plat := range platforms {
					if plat == pluginstore.Platform() {
						continue
					}
					path, dirs := platformBinary(cfg, t.Name, e.Version, plat)
					if path == "" {
						problems = append(problems, fmt.Sprintf("%s: cannot lock it for %s: no %s in %s; install it there with `switchboard plugin install --platform=%s ARCHIVE`", t.Name, plat, pluginstore.FileName(t.Name, e.Version), strings.Join(dirs, ", "), plat))
						continue
					}
					h, err := pluginstore.FileHash(path)
					if err != nil {
						problems = append(problems, fmt.Sprintf("%s: cannot read %s: %v", t.Name, path, err))
						continue
					}
					e.Hashes[plat] = h
				}
				lock.Plugins[t.Name] = e
				if err := (pluginstore.Gate{LockFile: lock.Path, DataDir: cfg.DataDir}).Record(t.Name, pr.surface); err != nil {
					log.Warn("cannot keep the locked tool surface for later differences", "plugin", t.Name, "error", err)
				}
				plats := slices.Sorted(maps.Keys(e.Hashes))
				fmt.Fprintf(a.stdout, "locked %s %s (%s, %d tools) for %s\n", t.Name, dashIfEmpty(e.Version), protocolsText(pr.protocols), len(pr.surface), strings.Join(plats, ", "))
			}
			// External servers: their tool surface (there is no binary of
			// ours to hash).
			for _, x := range loader.ExternalTargets(cfg, a.selfPath()) {
				surface, err := externalSurface(cmd.Context(), x, log)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: did not start, so it is not locked: %v", x.Name, err))
					if e := old.Plugins[x.Name]; e != nil && e.External {
						lock.Plugins[x.Name] = e
					}
					continue
				}
				lock.Plugins[x.Name] = &pluginstore.Entry{External: true, Surface: surface.Hash()}
				if err := (pluginstore.Gate{LockFile: lock.Path, DataDir: cfg.DataDir}).Record(x.Name, surface); err != nil {
					log.Warn("cannot keep the locked tool surface for later differences", "external", x.Name, "error", err)
				}
				fmt.Fprintf(a.stdout, "locked %s (external server, %d tools): its tool surface\n", x.Name, len(surface))
			}
			if err := lock.Write(); err != nil {
				return fail(2, "cannot write %s: %v", lock.Path, err)
			}
			fmt.Fprintf(a.stdout, "wrote %s\n", lock.Path)
			if len(problems) > 0 {
				return fail(1, "%s", strings.Join(problems, "; "))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&platforms, "platform", nil, "also lock the binaries for this <os>_<arch> (repeatable)")
	return cmd
}

func (a *app) pluginVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every plugin and external server against " + pluginstore.LockFileName + " (binary hashes, protocols, tool surface)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			launcher.HostVersion = Version
			log := a.logger(cfg, true)
			lock, exists, err := pluginstore.ReadLock(cfg.LockFile())
			if err != nil {
				return fail(1, "%v", err)
			}
			if !exists {
				return fail(1, "%s does not exist: run `switchboard plugin lock` to write it", lock.Path)
			}
			var problems []string
			seen := map[string]bool{}
			for _, t := range loader.PluginTargets(cfg, a.selfPath()) {
				seen[t.Name] = true
				e := lock.Plugins[t.Name]
				if e == nil {
					problems = append(problems, fmt.Sprintf("%s (%s) is not in %s: run `switchboard plugin lock`", t.Name, t.Path, lock.Path))
					continue
				}
				if err := lock.CheckBinary(t.Name, t.Path); err != nil {
					problems = append(problems, err.Error())
					continue
				}
				for plat, want := range e.Hashes {
					if plat == pluginstore.Platform() {
						continue
					}
					if path, _ := platformBinary(cfg, t.Name, e.Version, plat); path != "" {
						if got, err := pluginstore.FileHash(path); err == nil && got != want {
							problems = append(problems, (&pluginstore.MismatchError{Plugin: t.Name, Path: path, Platform: plat, Want: want, Got: got, LockFile: lock.Path}).Error())
						}
					}
				}
				t.Spec.SHA256, t.Spec.PinnedBy = pluginstore.HexOf(e.Hashes[pluginstore.Platform()]), lock.Path
				pr, err := startProbe(cmd.Context(), t, log)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s did not start: %v", t.Name, err))
					continue
				}
				if gone := missingProtocols(e.Protocols, pr.protocols); len(gone) > 0 {
					problems = append(problems, fmt.Sprintf("%s no longer speaks %s, which %s locks (it speaks %s now): a host that speaks only the missing version cannot load it; run `switchboard plugin lock` if the change is intended", t.Name, protocolsText(gone), lock.Path, protocolsText(pr.protocols)))
				} else if added := missingProtocols(pr.protocols, e.Protocols); len(added) > 0 {
					fmt.Fprintf(a.stdout, "note: %s also speaks %s, which %s does not list (`switchboard plugin lock` records it)\n", t.Name, protocolsText(added), lock.Path)
				}
				if e.Version != "" && pr.version != e.Version {
					problems = append(problems, fmt.Sprintf("%s is version %s, but %s locks %s: run `switchboard plugin lock` if the upgrade is intended", t.Name, dashIfEmpty(pr.version), lock.Path, e.Version))
				}
				if e.Surface != "" && pr.surface.Hash() != e.Surface {
					problems = append(problems, fmt.Sprintf("%s: its surface (tool names, descriptions, schemas or annotations, or its instructions) changed since it was locked (%s, now %s): the host quarantines it; review the change with `switchboard approve %s`", t.Name, e.Surface, pr.surface.Hash(), t.Name))
				}
				if len(problems) == 0 || !strings.HasPrefix(problems[len(problems)-1], t.Name) {
					fmt.Fprintf(a.stdout, "ok %s %s (%s)\n", t.Name, dashIfEmpty(e.Version), t.Path)
				}
			}
			for _, x := range loader.ExternalTargets(cfg, a.selfPath()) {
				seen[x.Name] = true
				e := lock.Plugins[x.Name]
				if e == nil || e.Surface == "" {
					problems = append(problems, fmt.Sprintf("%s (external server %s) is not in %s: run `switchboard plugin lock`", x.Name, x.Where, lock.Path))
					continue
				}
				surface, err := externalSurface(cmd.Context(), x, log)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s (external server) did not start: %v", x.Name, err))
					continue
				}
				if got := surface.Hash(); got != e.Surface {
					problems = append(problems, fmt.Sprintf("%s (external server): its surface (tool names, descriptions, schemas or annotations, or its instructions) changed since it was locked (%s, now %s): the host quarantines it; review the change with `switchboard approve %s`", x.Name, e.Surface, got, x.Name))
					continue
				}
				fmt.Fprintf(a.stdout, "ok %s (external server %s)\n", x.Name, x.Where)
			}
			for _, name := range slices.Sorted(maps.Keys(lock.Plugins)) {
				if !seen[name] {
					fmt.Fprintf(a.stdout, "note: %s locks %s, which the config no longer loads (`switchboard plugin lock` drops it)\n", lock.Path, name)
				}
			}
			if len(problems) > 0 {
				for _, p := range problems {
					fmt.Fprintf(a.stdout, "MISMATCH %s\n", p)
				}
				return fail(1, "%d plugin problem(s) against %s", len(problems), lock.Path)
			}
			return nil
		},
	}
}

// externalSurface connects to an external server once, as the host
// would, and returns its tool surface.
func externalSurface(ctx context.Context, x loader.ExternalTarget, log hclog.Logger) (pluginstore.Surface, error) {
	s, err := x.Connect(ctx, log)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close(context.Background()) }()
	return pluginstore.SurfaceOfServer(s.Describe()), nil
}

// missingProtocols returns the versions in want that have is missing.
func missingProtocols(want, have []int) []int {
	var out []int
	for _, v := range want {
		if !slices.Contains(have, v) {
			out = append(out, v)
		}
	}
	return out
}

// protocolsText is "protocol 2", "protocols 1 and 2" or "protocols 1, 2
// and 3".
func protocolsText(vs []int) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	switch len(parts) {
	case 0:
		return "no protocol"
	case 1:
		return "protocol " + parts[0]
	}
	return "protocols " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// PluginRow is one row of `plugin list`.
type PluginRow struct {
	Name string `json:"name"`
	// Kind is "plugin" or "external" (an external MCP server: no binary,
	// locked by its tool surface; Path is its command line or URL).
	Kind     string `json:"kind"`
	Version  string `json:"version,omitempty"`
	Platform string `json:"platform,omitempty"`
	Path     string `json:"path,omitempty"`
	// Installed is set for a binary on disk.
	Installed bool `json:"installed"`
	// Locked is "yes", "no", "mismatch" or "other version"; for an
	// external server "surface" (its tool surface is locked) or "no".
	Locked string `json:"locked"`
	// Loaded is set when the config loads this binary.
	Loaded bool `json:"loaded"`
	// Refused is why the host would not load it.
	Refused string `json:"refused,omitempty"`
}

func (a *app) pluginListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show the plugin binaries installed, locked and loaded, and the external servers",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			lock, _, err := pluginstore.ReadLock(cfg.LockFile())
			if err != nil {
				return fail(2, "%v", err)
			}
			targets := map[string]loader.PluginTarget{}
			for _, t := range loader.PluginTargets(cfg, a.selfPath()) {
				targets[t.Path] = t
			}
			var rows []PluginRow
			seen := map[string]bool{}
			add := func(path, name, version, platform string) {
				if seen[path] {
					return
				}
				seen[path] = true
				r := PluginRow{Name: name, Kind: "plugin", Version: version, Platform: platform, Path: path, Locked: "no"}
				if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
					r.Installed = true
				}
				if t, ok := targets[path]; ok {
					r.Loaded, r.Name = true, t.Name
					if t.Refused != nil {
						r.Refused = oneLine(t.Refused.Error())
					}
				}
				if e := lock.Plugins[r.Name]; e != nil {
					want, ok := e.Hashes[platform]
					got, herr := pluginstore.FileHash(path)
					switch {
					case !ok:
						r.Locked = "not for " + platform
					case herr == nil && got == want:
						r.Locked = "yes"
					case e.Version != "" && version != "" && e.Version != version:
						r.Locked = "other version (" + e.Version + ")"
					default:
						r.Locked = "mismatch"
					}
				}
				rows = append(rows, r)
			}
			for _, t := range loader.PluginTargets(cfg, a.selfPath()) {
				_, v, _ := pluginstore.ParseName(filepath.Base(t.Path))
				ver := ""
				if v != nil {
					ver = v.String()
				}
				add(t.Path, t.Name, ver, pluginstore.Platform())
			}
			var roots []string
			for _, d := range append([]string{cfg.InstallDir}, cfg.PluginDirs...) {
				roots = append(roots, d)
				if ents, err := os.ReadDir(d); err == nil {
					for _, e := range ents {
						if e.IsDir() && pluginstore.ValidPlatform(e.Name()) {
							roots = append(roots, filepath.Join(d, e.Name()))
						}
					}
				}
			}
			for _, dir := range roots {
				plat := filepath.Base(dir)
				if !pluginstore.ValidPlatform(plat) {
					plat = pluginstore.Platform()
				}
				for _, b := range pluginstore.List([]string{dir}) {
					add(b.Path, b.Name, b.VersionString(), plat)
				}
			}
			for _, x := range loader.ExternalTargets(cfg, a.selfPath()) {
				r := PluginRow{Name: x.Name, Kind: "external", Path: x.Where, Locked: "no", Loaded: true}
				if e := lock.Plugins[x.Name]; e != nil && e.External && e.Surface != "" {
					r.Locked = "surface"
				}
				rows = append(rows, r)
			}
			for _, name := range slices.Sorted(maps.Keys(lock.Plugins)) {
				found := false
				for _, r := range rows {
					found = found || r.Name == name
				}
				switch e := lock.Plugins[name]; {
				case found:
				case e.External:
					rows = append(rows, PluginRow{Name: name, Kind: "external", Locked: "surface (not loaded)"})
				default:
					rows = append(rows, PluginRow{Name: name, Kind: "plugin", Version: e.Version, Locked: "yes (no binary here)"})
				}
			}
			if a.jsonOut {
				return a.printJSON(rows)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PLUGIN\tKIND\tVERSION\tPLATFORM\tINSTALLED\tLOCKED\tLOADED\tPATH")
			for _, r := range rows {
				loaded := yesNo(r.Loaded)
				if r.Refused != "" {
					loaded = "refused"
				}
				installed := yesNo(r.Installed)
				if r.Kind == "external" {
					installed = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, dashIfEmpty(r.Version), dashIfEmpty(r.Platform), installed, r.Locked, loaded, dashIfEmpty(r.Path))
			}
			_ = tw.Flush()
			for _, r := range rows {
				if r.Refused != "" {
					fmt.Fprintf(a.stdout, "\n%s: %s\n", r.Name, r.Refused)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&a.jsonOut, "json", false, "print JSON")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
