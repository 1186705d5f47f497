// Package netguard decides which IP addresses Sluice may connect to on a
// user's behalf (webhook targets, link targets): not the loopback, private,
// link-local, documentation, benchmarking, reserved and other special
// ranges an attacker would aim at to reach the inside of a network
// (SSRF).
//
// [Special] is one table built from the IANA IPv4 and IPv6
// Special-Purpose Address Registries (RFC 6890 and its updates), with
// each entry's registry name and whether the registry calls it globally
// reachable, plus multicast and the deprecated site-local range, which the
// registries leave out. An address is judged by the most specific entry
// that holds it, so a globally reachable entry inside a blocked one (AS112
// inside 2001::/23) stays reachable. Addresses that carry an IPv4 address
// are judged by it: IPv4-mapped (::ffff:10.0.0.1) and the NAT64
// well-known prefix (64:ff9b::10.0.0.1, RFC 6052), so neither reaches a
// private IPv4 network through a translator.
//
// [Control] is a net.Dialer Control function refusing blocked addresses
// at connection time, after DNS resolution, so a name that resolves (or
// rebinds) to an inside address is refused too.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Entry is one range of the table.
type Entry struct {
	Prefix netip.Prefix
	// Name is the registry's name of the range ("Private-Use").
	Name string
	// Global is what the registry says of it ("Globally Reachable"), or
	// false where Sluice blocks it anyway (see the table's comments).
	Global bool
}

func e(prefix, name string, global bool) Entry {
	return Entry{Prefix: netip.MustParsePrefix(prefix), Name: name, Global: global}
}

// Special is the table of special-purpose ranges, IPv4 then IPv6, in the
// registries' order. Entries with Global true are listed so that the most
// specific match finds them; every other entry is blocked.
var Special = []Entry{
	// IANA IPv4 Special-Purpose Address Registry.
	e("0.0.0.0/8", `"This network"`, false),
	e("0.0.0.0/32", `"This host on this network"`, false),
	e("10.0.0.0/8", "Private-Use", false),
	e("100.64.0.0/10", "Shared Address Space", false),
	e("127.0.0.0/8", "Loopback", false),
	e("169.254.0.0/16", "Link Local", false),
	e("172.16.0.0/12", "Private-Use", false),
	e("192.0.0.0/24", "IETF Protocol Assignments", false),
	e("192.0.0.0/29", "IPv4 Service Continuity Prefix", false),
	e("192.0.0.8/32", "IPv4 dummy address", false),
	e("192.0.0.9/32", "Port Control Protocol Anycast", true),
	e("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", true),
	e("192.0.0.170/32", "NAT64/DNS64 Discovery", false),
	e("192.0.0.171/32", "NAT64/DNS64 Discovery", false),
	e("192.0.2.0/24", "Documentation (TEST-NET-1)", false),
	e("192.31.196.0/24", "AS112-v4", true),
	e("192.52.193.0/24", "AMT", true),
	// The registry marks it deprecated (RFC 7526) with no reachability:
	// relays that reach anything, blocked.
	e("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", false),
	e("192.168.0.0/16", "Private-Use", false),
	e("192.175.48.0/24", "Direct Delegation AS112 Service", true),
	e("198.18.0.0/15", "Benchmarking", false),
	e("198.51.100.0/24", "Documentation (TEST-NET-2)", false),
	e("203.0.113.0/24", "Documentation (TEST-NET-3)", false),
	e("240.0.0.0/4", "Reserved", false),
	e("255.255.255.255/32", "Limited Broadcast", false),
	// Not in the special-purpose registry: the multicast registry's block
	// (RFC 5771). A webhook is never multicast.
	e("224.0.0.0/4", "Multicast", false),

	// IANA IPv6 Special-Purpose Address Registry.
	e("::1/128", "Loopback Address", false),
	e("::/128", "Unspecified Address", false),
	// IPv4-mapped addresses are judged by their IPv4 address (Blocked
	// unmaps them first); the entry is here for the table's sake.
	e("::ffff:0:0/96", "IPv4-mapped Address", false),
	// Globally reachable in the registry: a NAT64 translator reaches the
	// IPv4 address in the last 32 bits, so Blocked judges that address.
	e("64:ff9b::/96", "IPv4-IPv6 Translat.", true),
	e("64:ff9b:1::/48", "IPv4-IPv6 Translat.", false),
	e("100::/64", "Discard-Only Address Block", false),
	e("100:0:0:1::/64", "Dummy IPv6 Prefix", false),
	e("2001::/23", "IETF Protocol Assignments", false),
	// No reachability in the registry; a tunnel to an address of the
	// tunnel's choosing, blocked.
	e("2001::/32", "TEREDO", false),
	e("2001:1::1/128", "Port Control Protocol Anycast", true),
	e("2001:1::2/128", "Traversal Using Relays around NAT Anycast", true),
	e("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", true),
	e("2001:2::/48", "Benchmarking", false),
	e("2001:3::/32", "AMT", true),
	e("2001:4:112::/48", "AS112-v6", true),
	e("2001:10::/28", "Deprecated (previously ORCHID)", false),
	e("2001:20::/28", "ORCHIDv2", true),
	e("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", true),
	e("2001:db8::/32", "Documentation", false),
	// No reachability in the registry: 6to4 embeds an IPv4 address of the
	// sender's choosing and is deprecated (RFC 7526); blocked whole.
	e("2002::/16", "6to4", false),
	e("2620:4f:8000::/48", "Direct Delegation AS112 Service", true),
	e("3fff::/20", "Documentation", false),
	e("5f00::/16", "Segment Routing (SRv6) SIDs", false),
	e("fc00::/7", "Unique-Local", false),
	e("fe80::/10", "Link-Local Unicast", false),
	// Not in the registry: deprecated site-local (RFC 3879), still routed
	// inside some networks, and multicast (RFC 4291).
	e("fec0::/10", "Site-Local (deprecated)", false),
	e("ff00::/8", "Multicast", false),
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Lookup returns the most specific entry of Special holding ip (after
// unmapping IPv4-mapped addresses), if any.
func Lookup(ip netip.Addr) (Entry, bool) {
	ip = ip.Unmap().WithZone("")
	var best Entry
	found := false
	for _, en := range Special {
		if en.Prefix.Contains(ip) && (!found || en.Prefix.Bits() > best.Prefix.Bits()) {
			best, found = en, true
		}
	}
	return best, found
}

// Blocked reports whether ip is in a range that is not globally reachable,
// and names the range. IPv4-mapped and NAT64 (64:ff9b::/96) addresses are
// judged by the IPv4 address they carry. The invalid Addr is blocked.
func Blocked(ip netip.Addr) (name string, blocked bool) {
	if !ip.IsValid() {
		return "invalid address", true
	}
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		b := ip.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if name, blocked := Blocked(v4); blocked {
			return "IPv4-IPv6 Translat. of " + name, true
		}
		return "", false
	}
	if en, ok := Lookup(ip); ok && !en.Global {
		return en.Name, true
	}
	return "", false
}

// ErrBlocked is the error Control returns for a blocked address (wrapped
// with the address and its range).
var ErrBlocked = errors.New("address is not globally reachable")

// Control is a net.Dialer Control function: it refuses to connect to a
// blocked address. Set it on every dialer that reaches an address a user
// chose, so the check applies to each address DNS returns, at the moment
// of connecting.
func Control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrBlocked, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrBlocked, address)
	}
	if name, blocked := Blocked(ip); blocked {
		return fmt.Errorf("%w: %s is in %s", ErrBlocked, ip, name)
	}
	return nil
}
