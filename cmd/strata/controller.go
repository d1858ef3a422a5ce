package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-io/strata/internal/etcdnode"
)

// newControllerCmd is `strata controller add|remove`: changes to the set
// of controllers (the metadata store's etcd members) while the cluster
// runs, in the spirit of KIP-853's `kafka-metadata-quorum add-controller`
// and `remove-controller` (docs/cluster.md "Adding and removing
// controllers").
func newControllerCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "controller", Short: "Add or remove a controller (a member of the metadata store) while the cluster runs"}
	cmd.AddCommand(newControllerAddCmd(), newControllerRemoveCmd())
	return cmd
}

// controllerClient connects to the metadata store through controller
// listeners. It first dials them: when none accepts a connection, the
// etcd client would only report a deadline after the whole timeout
// ("metadata store unavailable"), which reads as a lost quorum when the
// address is simply wrong (say, the default 127.0.0.1:9093 against a
// zero-configuration broker, whose controller listener is a port chosen
// at start).
func controllerClient(controllers string, timeout time.Duration) (*clientv3.Client, error) {
	var addrs, eps []string
	for _, a := range strings.Split(controllers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
			eps = append(eps, "http://"+a)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("--bootstrap-controller: give at least one controller listener host:port")
	}
	if err := dialAnyController(addrs, timeout); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(controllerClientConfig(eps, timeout))
	if err != nil {
		return nil, fmt.Errorf("connect to the controllers %s: %w", controllers, err)
	}
	return cli, nil
}

// dialAnyController returns nil once one of addrs accepts a TCP
// connection, else an error naming them and where to find the address.
func dialAnyController(addrs []string, timeout time.Duration) error {
	var errs []string
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, min(timeout, 5*time.Second))
		if err == nil {
			c.Close()
			return nil
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("no controller listener answers at %s (--bootstrap-controller): %s; give a controller listener of the cluster, an address of its controller.quorum.voters (a broker started with no KRaft setting logs its own at start: \"strata broker listening ... controller=HOST:PORT\")",
		strings.Join(addrs, ","), strings.Join(errs, "; "))
}

func newControllerAddCmd() *cobra.Command {
	var controllers, address, metadataDir string
	var id int32
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add a new controller as a learner; it becomes a voter once it has started and caught up",
		Long:  "Adds controller --controller-id at --controller-address (its controller listener) to the metadata store as a non-voting learner (etcd's learners), and leaves the cluster it joins in --metadata-dir (the new node's metadata.log.dir, or its first log dir). Then start the new node there with process.roles including controller and controller.quorum.voters listing every controller, itself included: it catches up from a snapshot without voting, then promotes itself to a voter. The quorum is never at risk meanwhile.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id < 0 {
				return fmt.Errorf("--controller-id: give the new controller's node.id")
			}
			host, port, err := net.SplitHostPort(address)
			if err != nil || host == "" {
				return fmt.Errorf("--controller-address %q: give the new controller's controller listener as host:port", address)
			}
			p, err := strconv.Atoi(port)
			if err != nil || p <= 0 || p > 65535 {
				return fmt.Errorf("--controller-address %q: port must be a number from 1 to 65535", address)
			}
			if metadataDir == "" {
				return fmt.Errorf("--metadata-dir: give the new node's metadata.log.dir (or first log dir), where it learns the cluster it joins")
			}
			if j, _ := os.ReadFile(etcdnode.JoinFile(metadataDir)); len(j) > 0 {
				return fmt.Errorf("%s exists: controller add was run for this directory already (start the node, or remove the file to start over)", etcdnode.JoinFile(metadataDir))
			}
			if _, err := os.Stat(etcdnode.MemberDir(metadataDir)); err == nil {
				return fmt.Errorf("%s holds a metadata store member already: a new controller starts from an empty metadata directory", etcdnode.MemberDir(metadataDir))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cli, err := controllerClient(controllers, timeout)
			if err != nil {
				return err
			}
			defer cli.Close()
			ms, err := etcdnode.Members(ctx, cli)
			if err != nil {
				return err
			}
			v := etcdnode.Voter{ID: id, Host: host, Port: p}
			var voters []string
			for _, m := range ms {
				if m.NodeID == id {
					return fmt.Errorf("controller %d is a member already (at %s)", id, strings.TrimPrefix(m.PeerURL, "http://"))
				}
				if m.PeerURL == v.URL() {
					if m.NodeID < 0 { // an added member that has not started has no name yet
						return fmt.Errorf("a controller at %s was added already and has not started yet: start it (its metadata directory holds the cluster it joins)", address)
					}
					return fmt.Errorf("%s is the address of controller %d already", address, m.NodeID)
				}
				voters = append(voters, fmt.Sprintf("%d@%s", m.NodeID, strings.TrimPrefix(m.PeerURL, "http://")))
			}
			voters = append(voters, fmt.Sprintf("%d@%s", id, address))
			join, err := etcdnode.AddLearner(ctx, cli, v)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(etcdnode.JoinFile(metadataDir)), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(etcdnode.JoinFile(metadataDir), []byte(join+"\n"), 0o644); err != nil {
				return fmt.Errorf("write the join file (the learner is added; remove it with `strata controller remove --controller-id %d`): %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "controller %d added as a learner at %s.\nStart it with --controller.quorum.voters %s and its metadata in %s;\nit becomes a voter once it has caught up.\n",
				id, address, strings.Join(voters, ","), metadataDir)
			return nil
		},
	}
	cmd.Flags().StringVar(&controllers, "bootstrap-controller", "127.0.0.1:9093", "controller listener(s) of the running cluster, host:port[,host:port]")
	cmd.Flags().Int32Var(&id, "controller-id", -1, "node.id of the new controller")
	cmd.Flags().StringVar(&address, "controller-address", "", "the new controller's controller listener, host:port (its entry in controller.quorum.voters)")
	cmd.Flags().StringVar(&metadataDir, "metadata-dir", "", "the new node's metadata.log.dir (or first log dir)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the controllers")
	return cmd
}

func newControllerRemoveCmd() *cobra.Command {
	var controllers string
	var id int32
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Remove a controller from the metadata store (refused when the rest would lose their quorum)",
		Long:  "Removes controller --controller-id from the metadata store's members. Refused when the remaining voters that answer now would be fewer than a majority of the remaining voters (the metadata store would stop), and for the last controller. Stop the removed node afterwards; nodes that still list it in controller.quorum.voters keep working (update their voter lists at their next restart).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id < 0 {
				return fmt.Errorf("--controller-id: give the node.id of the controller to remove")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cli, err := controllerClient(controllers, timeout)
			if err != nil {
				return err
			}
			defer cli.Close()
			ms, err := etcdnode.MembersLocal(ctx, cli)
			if err != nil {
				return err
			}
			var target *etcdnode.Member
			var rest []etcdnode.Member
			for i, m := range ms {
				switch {
				case m.NodeID == id:
					target = &ms[i]
				case !m.IsLearner:
					rest = append(rest, m)
				}
			}
			if target == nil {
				return fmt.Errorf("controller %d is not a member of the metadata store", id)
			}
			if !target.IsLearner {
				if len(rest) == 0 {
					return fmt.Errorf("controller %d is the only voter: removing it would leave no metadata store", id)
				}
				// A majority of the voters left must answer, or the store
				// stops at the removal (etcd's quorum; KIP-853 refuses a
				// removal that loses the quorum likewise).
				up := 0
				var down []string
				for _, m := range rest {
					sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
					_, err := cli.Status(sctx, m.PeerURL)
					scancel()
					if err == nil {
						up++
					} else {
						down = append(down, strconv.Itoa(int(m.NodeID)))
					}
				}
				if need := len(rest)/2 + 1; up < need {
					return fmt.Errorf("refused: removing controller %d would leave %d voters of which only %d answer (controllers %s do not), below their quorum of %d: the metadata store would stop; start the stopped controllers first",
						id, len(rest), up, strings.Join(down, ","), need)
				}
			}
			if err := etcdnode.Remove(ctx, cli, id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "controller %d removed; %d voters remain. Stop node %d now.\n", id, len(rest), id)
			return nil
		},
	}
	cmd.Flags().StringVar(&controllers, "bootstrap-controller", "127.0.0.1:9093", "controller listener(s) of the running cluster, host:port[,host:port]")
	cmd.Flags().Int32Var(&id, "controller-id", -1, "node.id of the controller to remove")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the controllers")
	return cmd
}

// controllerClientConfig is the metadata store client of a CLI command:
// etcdnode.ClientConfig (keepalive pings abandon a frozen controller)
// with the command's timeout for the first connection.
func controllerClientConfig(eps []string, timeout time.Duration) clientv3.Config {
	cfg := etcdnode.ClientConfig(nil, eps...)
	cfg.DialTimeout = timeout
	return cfg
}
