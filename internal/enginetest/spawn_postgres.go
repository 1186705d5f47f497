package enginetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// StartPostgres runs a PostgreSQL server for the calling test on a spare
// loopback port, in a fresh cluster made by initdb (user "postgres", trust
// authentication, no Unix socket, fsync off: committed data
// survives Kill, not an OS crash), and returns once it answers a
// query. URL gives "postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable".
// The server is stopped with a fast shutdown (SIGINT) by Stop and when the
// test ends.
//
// PostgreSQL refuses to run as root, so when the test runs as root the
// cluster lives in a directory owned by the "postgres" system user and the
// server runs as that user. It skips the test (fails it when CI=true) if
// initdb or postgres is not installed, or, as root, if there is no
// "postgres" user.
func StartPostgres(t testing.TB) *Process {
	t.Helper()
	initdb := findBinary(t, "initdb")
	findBinary(t, "postgres")
	cred := postgresCredential(t)

	// Not t.TempDir: its parents are private to root.
	root, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the process, so it runs after the process stops.
	t.Cleanup(func() { os.RemoveAll(root) })
	if cred != nil {
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(root, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}

	return startProcess(t, spec{
		name: "postgres",
		path: "postgres",
		url: func(addr string) string {
			return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
		},
		args: func(port int, _, tag string) []string {
			return []string{
				"-D", data, "-p", strconv.Itoa(port), "-k", "",
				"-c", "listen_addresses=127.0.0.1",
				"-c", "cluster_name=" + tag,
				// Safe against the process dying, which is what tests
				// do to it; only an OS crash could lose data. Keep
				// synchronous_commit on: with it off, Kill loses
				// committed transactions.
				"-c", "fsync=off", "-c", "full_page_writes=off",
			}
		},
		ready: postgresReady,
		prepare: func(cmd *exec.Cmd) {
			cmd.SysProcAttr.Credential = cred
		},
		stopSignal: syscall.SIGINT, // "fast": SIGTERM would wait for every client
	}, root)
}

// postgresCredential returns the "postgres" user's credential when the test
// runs as root, and nil otherwise.
func postgresCredential(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		missing(t, fmt.Sprintf("running as root, PostgreSQL needs a postgres user (%v)", err))
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("postgres user: uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// postgresReady connects and checks that the server's cluster_name is tag.
func postgresReady(ctx context.Context, addr, tag string, _ int) error {
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+addr+"/postgres?sslmode=disable")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var name string
	if err := conn.QueryRow(ctx, "SHOW cluster_name").Scan(&name); err != nil {
		return err
	}
	if name != tag {
		return fmt.Errorf("postgres: another server (%q) answers on this port", name)
	}
	return nil
}
