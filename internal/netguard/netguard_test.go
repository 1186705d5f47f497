package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

// TestSpecialRanges names every entry of the registries with an address
// in it and what Blocked says of it; an entry of Special missing here
// fails the test.
func TestSpecialRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix, addr string
		name         string // the range Blocked names; "" when reachable
	}{
		{"0.0.0.0/8", "0.1.2.3", `"This network"`},
		{"0.0.0.0/32", "0.0.0.0", `"This host on this network"`},
		{"10.0.0.0/8", "10.200.0.1", "Private-Use"},
		{"100.64.0.0/10", "100.127.255.254", "Shared Address Space"},
		{"127.0.0.0/8", "127.0.0.53", "Loopback"},
		{"169.254.0.0/16", "169.254.169.254", "Link Local"},
		{"172.16.0.0/12", "172.31.255.255", "Private-Use"},
		{"192.0.0.0/24", "192.0.0.200", "IETF Protocol Assignments"},
		{"192.0.0.0/29", "192.0.0.1", "IPv4 Service Continuity Prefix"},
		{"192.0.0.8/32", "192.0.0.8", "IPv4 dummy address"},
		{"192.0.0.9/32", "192.0.0.9", ""},
		{"192.0.0.10/32", "192.0.0.10", ""},
		{"192.0.0.170/32", "192.0.0.170", "NAT64/DNS64 Discovery"},
		{"192.0.0.171/32", "192.0.0.171", "NAT64/DNS64 Discovery"},
		{"192.0.2.0/24", "192.0.2.10", "Documentation (TEST-NET-1)"},
		{"192.31.196.0/24", "192.31.196.1", ""},
		{"192.52.193.0/24", "192.52.193.1", ""},
		{"192.88.99.0/24", "192.88.99.1", "Deprecated (6to4 Relay Anycast)"},
		{"192.168.0.0/16", "192.168.1.1", "Private-Use"},
		{"192.175.48.0/24", "192.175.48.6", ""},
		{"198.18.0.0/15", "198.19.255.1", "Benchmarking"},
		{"198.51.100.0/24", "198.51.100.7", "Documentation (TEST-NET-2)"},
		{"203.0.113.0/24", "203.0.113.9", "Documentation (TEST-NET-3)"},
		{"240.0.0.0/4", "250.1.2.3", "Reserved"},
		{"255.255.255.255/32", "255.255.255.255", "Limited Broadcast"},
		{"224.0.0.0/4", "239.255.255.250", "Multicast"},

		{"::1/128", "::1", "Loopback Address"},
		{"::/128", "::", "Unspecified Address"},
		{"::ffff:0:0/96", "::ffff:10.0.0.1", "Private-Use"}, // judged by its IPv4 address
		{"64:ff9b::/96", "64:ff9b::10.0.0.1", "IPv4-IPv6 Translat. of Private-Use"},
		{"64:ff9b:1::/48", "64:ff9b:1::8.8.8.8", "IPv4-IPv6 Translat."},
		{"100::/64", "100::1", "Discard-Only Address Block"},
		{"100:0:0:1::/64", "100:0:0:1::1", "Dummy IPv6 Prefix"},
		{"2001::/23", "2001:100::1", "IETF Protocol Assignments"},
		{"2001::/32", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "TEREDO"},
		{"2001:1::1/128", "2001:1::1", ""},
		{"2001:1::2/128", "2001:1::2", ""},
		{"2001:1::3/128", "2001:1::3", ""},
		{"2001:2::/48", "2001:2::1", "Benchmarking"},
		{"2001:3::/32", "2001:3::1", ""},
		{"2001:4:112::/48", "2001:4:112::1", ""},
		{"2001:10::/28", "2001:10::1", "Deprecated (previously ORCHID)"},
		{"2001:20::/28", "2001:20::1", ""},
		{"2001:30::/28", "2001:30::1", ""},
		{"2001:db8::/32", "2001:db8::1", "Documentation"},
		{"2002::/16", "2002:a00:1::1", "6to4"},
		{"2620:4f:8000::/48", "2620:4f:8000::1", ""},
		{"3fff::/20", "3fff::1", "Documentation"},
		{"5f00::/16", "5f00::1", "Segment Routing (SRv6) SIDs"},
		{"fc00::/7", "fd12:3456::1", "Unique-Local"},
		{"fe80::/10", "fe80::1%eth0", "Link-Local Unicast"},
		{"fec0::/10", "fec0::1", "Site-Local (deprecated)"},
		{"ff00::/8", "ff02::1", "Multicast"},
	}
	tested := map[netip.Prefix]bool{}
	for _, tt := range tests {
		pfx := netip.MustParsePrefix(tt.prefix)
		tested[pfx] = true
		addr := netip.MustParseAddr(tt.addr)
		name, blocked := Blocked(addr)
		if name != tt.name || blocked != (tt.name != "") {
			t.Errorf("%s: Blocked(%s) = %q, %v; want %q, %v", tt.prefix, tt.addr, name, blocked, tt.name, tt.name != "")
		}
	}
	for _, en := range Special {
		if !tested[en.Prefix] {
			t.Errorf("Special has %s (%s), which this test does not name", en.Prefix, en.Name)
		}
	}
}

// TestReachable: ordinary public addresses, in every form, get through.
func TestReachable(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.128.0.1", "198.20.0.1", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2001:4860::8888"} {
		if name, blocked := Blocked(netip.MustParseAddr(s)); blocked {
			t.Errorf("Blocked(%s) = %q, want reachable", s, name)
		}
	}
	if _, blocked := Blocked(netip.Addr{}); !blocked {
		t.Error("the invalid address is reachable, want blocked")
	}
}

func TestControl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		address string
		blocked bool
	}{
		{"8.8.8.8:443", false},
		{"[2606:4700:4700::1111]:443", false},
		{"127.0.0.1:80", true},
		{"[::ffff:169.254.169.254]:80", true},
		{"[64:ff9b::a9fe:a9fe]:80", true}, // 169.254.169.254 through NAT64
		{"[2002:c0a8:101::1]:80", true},   // 6to4 of 192.168.1.1
		{"198.18.0.1:80", true},
		{"not-an-address:80", true},
		{"garbage", true},
	}
	for _, tt := range tests {
		err := Control("tcp", tt.address, nil)
		if got := errors.Is(err, ErrBlocked); got != tt.blocked {
			t.Errorf("Control(%q) = %v, want blocked %v", tt.address, err, tt.blocked)
		}
	}
}
