package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	csidriver "github.com/fakecloud/fakecloud-csi/pkg/csi"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/registration"
	"github.com/fakecloud/fakecloud-csi/pkg/version"
)

// run is the whole program: `driver [flags]` serves; `driver nodeinfo|probe` query a plugin;
// `driver registrar` registers a node plugin with its kubelet; `driver watch` prints node
// plugins' capacity state once a second; `driver version` prints the version.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := csidriver.DefaultOptions()
	opts.Version, _ = version.Get()
	root := cli.NewRoot(&cobra.Command{
		Use:   "driver",
		Short: "CSI driver " + csidriver.DriverName + " for the fake cloud",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.ShowVersion {
				_, err := fmt.Fprintln(stdout, version.String("driver"))
				return err
			}
			if len(args) == 0 {
				// Validate's first complaint (--node-id in mode all) would not tell a newcomer
				// what the program is for.
				return errors.New("no flags given: driver serves CSI in --mode=controller, node or all (the default, which needs --node-id; driver --help lists every flag), " +
					"or queries a running plugin (nodeinfo, probe, watch); `make run` starts a fake cloud, a controller and node plugins on this machine")
			}
			return serve(cmd.Context(), opts)
		},
	}, stdout, stderr, cli.WithCompletion(), cli.WithoutFlagHint())
	opts.AddFlags(root.Flags())
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlagSet(klogFlags)
	root.AddCommand(queryCommand(stdout, "nodeinfo", "Print NodeGetInfo of a running node plugin as JSON",
		func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
			resp, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}, grpc.WaitForReady(true))
			if status.Code(err) == codes.Unimplemented {
				// --mode=controller registers no Node service: say so rather than "unknown service".
				return nil, fmt.Errorf("this plugin serves no CSI Node service: it is a controller plugin (--mode=controller); "+
					"ask a node plugin's socket (make run prints them): %w", err)
			}
			return resp, err
		}))
	root.AddCommand(queryCommand(stdout, "probe", "Print Probe of a running plugin as JSON; fails when not ready",
		func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
			resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
			if err == nil && resp.GetReady() != nil && !resp.GetReady().GetValue() {
				return resp, errors.New("plugin is not ready")
			}
			return resp, err
		}))
	root.AddCommand(registrarCommand())
	root.AddCommand(watchCommand(stdout))
	root.AddCommand(&cobra.Command{Use: "version", Short: "Print the version and commit (as --version)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, version.String("driver"))
			return err
		}})
	return cli.Execute(ctx, root, args)
}

// registrarCommand is `driver registrar`: the kubelet plugin registration of the node plugin
// in its pod, in place of node-driver-registrar (not buildable from the Go module proxy), with
// the flags of node-driver-registrar that deploy/kind uses. It runs until SIGTERM and then
// removes its socket.
func registrarCommand() *cobra.Command {
	cfg := registration.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "registrar",
		Short: "Register the node plugin with the kubelet (plugin registration socket and /healthz)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return registration.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.CSIAddress, "csi-address", cfg.CSIAddress, "the driver's CSI socket in this container: a path or unix:// URL")
	f.StringVar(&cfg.KubeletRegistrationPath, "kubelet-registration-path", cfg.KubeletRegistrationPath, "the same socket's absolute path on the node, as the kubelet dials it")
	f.StringVar(&cfg.PluginRegistrationDir, "plugin-registration-path", cfg.PluginRegistrationDir, "the kubelet's plugins_registry folder in this container")
	f.StringVar(&cfg.HTTPEndpoint, "http-endpoint", cfg.HTTPEndpoint, "host:port for /healthz (empty: off); it fails until the socket is served and when the kubelet refused the plugin")
	f.DurationVar(&cfg.CallTimeout, "timeout", cfg.CallTimeout, "timeout of each GetPluginInfo attempt and /healthz check")
	return cmd
}

// queryCommand is a subcommand that dials --endpoint, makes one call (waiting up to --timeout
// for the plugin to answer) and prints the answer as JSON, also when call returns an answer
// with an error. A unix socket that does not exist fails at once: no plugin listens there,
// and waiting would only turn a wrong path into a DeadlineExceeded after --timeout.
func queryCommand(stdout io.Writer, name, short string, call func(context.Context, *grpc.ClientConn) (proto.Message, error)) *cobra.Command {
	endpoint := csidriver.DefaultOptions().Endpoint
	timeout := 30 * time.Second
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			network, addr, err := csidriver.ParseEndpoint(endpoint)
			if err != nil {
				return err
			}
			target := "unix://" + addr
			if network == "tcp" {
				target = "passthrough:///" + addr
			} else if err := checkSocket(addr); err != nil {
				return fmt.Errorf("%s on %s: %w", name, endpoint, err)
			}
			conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return fmt.Errorf("dial %s: %w", endpoint, err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			resp, callErr := call(ctx, conn)
			if resp != nil && !isNil(resp) {
				b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(resp)
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintln(stdout, string(b)); err != nil {
					return err
				}
			}
			if callErr != nil {
				return fmt.Errorf("%s on %s: %w", name, endpoint, callErr)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", endpoint, "CSI endpoint of the plugin: unix:///path/csi.sock or tcp://host:port")
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "how long to wait for the answer (a unix socket that does not exist fails at once)")
	return cmd
}

// checkSocket returns an error when path is not a unix socket anyone listens on: it does not
// exist (the plugin is not running, or listens elsewhere), is some other kind of file, or
// refuses connections (a socket left behind by a plugin that died). A socket that accepts
// but does not answer is the caller's --timeout to wait out.
func checkSocket(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("socket %s does not exist: is the plugin running, with this --endpoint?", path)
	case err != nil:
		return fmt.Errorf("socket %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s is not a unix socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("nothing listens on socket %s (left behind by a plugin that stopped?)", path)
	}
	if err == nil {
		_ = c.Close()
	}
	return nil
}

// isNil reports whether m is a typed nil pointer, as a failed gRPC call returns.
func isNil(m proto.Message) bool { return !m.ProtoReflect().IsValid() }

// serve validates the options (the one place they are), builds the cloud and Kubernetes
// clients, runs a node plugin's start-up cluster check (clustercheck.Decide: its capacity
// mode; the one step that waits on the API server), builds the driver (no I/O) and runs it
// until ctx ends (Driver.Run: the state directory's lock and the capacity restore first).
func serve(ctx context.Context, opts csidriver.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	clientOpts := []cloud.Option{cloud.WithUserAgent("fakecloud-csi/" + opts.Version)}
	if opts.CloudTokenFile != "" {
		clientOpts = append(clientOpts, cloud.WithTokenFile(opts.CloudTokenFile))
	}
	client, err := cloud.NewClient(opts.CloudURL, clientOpts...)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	kube, err := clustercheck.NewClient(opts.Kubeconfig, "fakecloud-csi/"+opts.Version)
	if err != nil {
		return err
	}
	var mode clustercheck.Mode // a controller plugin reports no capacity: nothing to decide
	if opts.Mode != csidriver.ModeController {
		mode = clustercheck.Decide(ctx, opts.ClusterCheckConfig(), kube, reg)
	}
	d, err := csidriver.NewForCloud(opts, client, mode, mount.NewLinux(), reg)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}
