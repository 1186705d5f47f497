package enginetest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// Ports for engines that must be told theirs on the command line: see the
// package doc, "Ports".

// portRange is where spare ports are picked: the portSpan ports below the
// ephemeral range, or 0, 0 when that range starts too low (then spare
// ports come from the kernel, as for a :0 listener).
var portLow, portHigh = portRange()

const portSpan = 12000

func portRange() (lo, hi int) {
	f, err := os.Open("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Split(bufio.ScanWords)
	if !sc.Scan() {
		return 0, 0
	}
	first, err := strconv.Atoi(sc.Text())
	if err != nil || first-portSpan < 10000 {
		return 0, 0
	}
	return first - portSpan, first - 1
}

// portHold keeps a loopback TCP port bound, not listening.
type portHold struct {
	port int
	fd   int
}

// holdSparePort picks a free loopback port and holds it.
func holdSparePort() (*portHold, error) {
	if portLow == 0 {
		return holdPort(0, false)
	}
	var last error
	for range 100 {
		h, err := holdPort(portLow+rand.IntN(portHigh-portLow+1), false)
		if err == nil {
			return h, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no free port in %d-%d after 100 tries: %w", portLow, portHigh, last)
}

// holdPort binds a socket to 127.0.0.1:port (port 0: one the kernel
// picks). With reuse, it binds even while connections of a stopped engine
// linger in TIME_WAIT on the port; pickers bind without it, so they still
// see the port as taken.
func holdPort(port int, reuse bool) (*portHold, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if reuse {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
			syscall.Close(fd)
			return nil, fmt.Errorf("SO_REUSEADDR: %w", err)
		}
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("bind 127.0.0.1:%d: %w", port, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("getsockname: %w", err)
	}
	return &portHold{port: sa.(*syscall.SockaddrInet4).Port, fd: fd}, nil
}

// release lets the port go, for the engine about to bind it.
func (h *portHold) release() {
	if h != nil && h.fd >= 0 {
		syscall.Close(h.fd)
		h.fd = -1
	}
}

// sparePort returns a loopback TCP port that is free and, when the kernel's
// ephemeral range allows, outside it: only another spare port picker could
// take it before the caller binds it.
func sparePort() (int, error) {
	h, err := holdSparePort()
	if err != nil {
		return 0, err
	}
	h.release()
	return h.port, nil
}

// SpareAddr returns "127.0.0.1:port" with a free loopback TCP port outside
// the kernel's ephemeral range, for a listener the test starts (or
// configures) itself. Prefer listening on 127.0.0.1:0 and handing the
// listener over; when the address must be known first (a child process's
// flag), retry with a new one on "address already in use".
func SpareAddr(t testing.TB) string {
	t.Helper()
	port, err := sparePort()
	if err != nil {
		t.Fatalf("pick a spare port: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// RefusedAddr returns "127.0.0.1:port" of a port held for the test by a
// socket that does not listen: every connection to it is refused, and no
// other test can listen there until the test ends (as it could on a port
// picked free and closed).
func RefusedAddr(t testing.TB) string {
	t.Helper()
	h, err := holdSparePort()
	if err != nil {
		t.Fatalf("hold a port: %v", err)
	}
	t.Cleanup(h.release)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(h.port))
}
