package queue

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDestinationsPermits is the address check, range by range, in IPv4,
// IPv6 and the IPv6 forms that carry an IPv4 address.
func TestDestinationsPermits(t *testing.T) {
	t.Parallel()
	none := Destinations{}
	loop := Destinations{AllowLoopback: true}
	allow := func(cidrs ...string) Destinations { return Destinations{Allowed: prefixes(cidrs...)} }
	tests := []struct {
		name string
		ip   string
		d    Destinations
		want bool
	}{
		// Public addresses pass.
		{name: "public v4", ip: "93.184.216.34", d: none, want: true},
		{name: "public v4 next to 10/8", ip: "11.0.0.1", d: none, want: true},
		{name: "public v4 next to 172.16/12", ip: "172.32.0.1", d: none, want: true},
		{name: "public v4 next to 100.64/10", ip: "100.128.0.1", d: none, want: true},
		{name: "public v6", ip: "2606:2800:220:1:248:1893:25c8:1946", d: none, want: true},
		{name: "public v4 mapped", ip: "::ffff:93.184.216.34", d: none, want: true},
		{name: "public v4 through NAT64", ip: "64:ff9b::5db8:d822", d: none, want: true},

		// Private.
		{name: "10/8", ip: "10.1.2.3", d: none},
		{name: "10/8 last", ip: "10.255.255.255", d: none},
		{name: "172.16/12", ip: "172.16.0.1", d: none},
		{name: "172.16/12 last", ip: "172.31.255.254", d: none},
		{name: "192.168/16", ip: "192.168.1.1", d: none},
		{name: "fc00::/7 fc", ip: "fc00::1", d: none},
		{name: "fc00::/7 fd", ip: "fd12:3456::1", d: none},
		{name: "10/8 mapped", ip: "::ffff:10.1.2.3", d: none},
		{name: "192.168/16 mapped", ip: "::ffff:192.168.0.1", d: none},
		{name: "10/8 through NAT64", ip: "64:ff9b::a01:203", d: none},
		{name: "10/8 IPv4-compatible", ip: "::10.1.2.3", d: none},
		{name: "10/8 in 6to4", ip: "2002:a01:203::1", d: none},

		// Loopback: only with the setting.
		{name: "127.0.0.1", ip: "127.0.0.1", d: none},
		{name: "127/8 other", ip: "127.8.9.10", d: none},
		{name: "::1", ip: "::1", d: none},
		{name: "127.0.0.1 mapped", ip: "::ffff:127.0.0.1", d: none},
		{name: "127.0.0.1 through NAT64", ip: "64:ff9b::7f00:1", d: none},
		{name: "127.0.0.1 with the setting", ip: "127.0.0.1", d: loop, want: true},
		{name: "127/8 other with the setting", ip: "127.8.9.10", d: loop, want: true},
		{name: "::1 with the setting", ip: "::1", d: loop, want: true},
		{name: "127.0.0.1 mapped with the setting", ip: "::ffff:127.0.0.1", d: loop, want: true},
		{name: "the setting opens loopback only", ip: "10.1.2.3", d: loop},

		// Link-local and the cloud metadata services.
		{name: "169.254/16", ip: "169.254.1.1", d: none},
		{name: "metadata v4", ip: "169.254.169.254", d: none},
		{name: "metadata v4 mapped", ip: "::ffff:169.254.169.254", d: none},
		{name: "metadata v4 through NAT64", ip: "64:ff9b::a9fe:a9fe", d: none},
		{name: "metadata v6 (AWS)", ip: "fd00:ec2::254", d: none},
		{name: "metadata Alibaba", ip: "100.100.100.200", d: none},
		{name: "metadata Oracle legacy", ip: "192.0.0.192", d: none},
		{name: "Azure WireServer", ip: "168.63.129.16", d: none},
		{name: "fe80::/10", ip: "fe80::1", d: none},
		{name: "fe80::/10 with a zone", ip: "fe80::1%eth0", d: none},
		{name: "metadata even with loopback on", ip: "169.254.169.254", d: loop},

		// Unspecified, multicast, broadcast: never, not even allowlisted.
		{name: "0.0.0.0", ip: "0.0.0.0", d: none},
		{name: "0/8", ip: "0.1.2.3", d: none},
		{name: "::", ip: "::", d: none},
		{name: "0.0.0.0 mapped", ip: "::ffff:0.0.0.0", d: none},
		{name: "0.0.0.0 with loopback on", ip: "0.0.0.0", d: loop},
		{name: "0.0.0.0 allowlisted", ip: "0.0.0.0", d: allow("0.0.0.0/0")},
		{name: "multicast v4", ip: "224.0.0.1", d: none},
		{name: "multicast v4 last", ip: "239.255.255.255", d: none},
		{name: "multicast v6", ip: "ff02::1", d: none},
		{name: "multicast v4 mapped", ip: "::ffff:224.0.0.251", d: none},
		{name: "multicast allowlisted", ip: "224.0.0.1", d: allow("224.0.0.0/4")},
		{name: "broadcast", ip: "255.255.255.255", d: none},
		{name: "broadcast allowlisted", ip: "255.255.255.255", d: allow("240.0.0.0/4")},

		// CGNAT.
		{name: "100.64/10", ip: "100.64.0.1", d: none},
		{name: "100.64/10 last", ip: "100.127.255.254", d: none},
		{name: "100.64/10 mapped", ip: "::ffff:100.64.0.1", d: none},

		// Other non-global ranges.
		{name: "IETF protocol assignments", ip: "192.0.0.8", d: none},
		{name: "TEST-NET-1", ip: "192.0.2.1", d: none},
		{name: "6to4 relay anycast", ip: "192.88.99.1", d: none},
		{name: "benchmarking v4", ip: "198.18.0.1", d: none},
		{name: "TEST-NET-2", ip: "198.51.100.1", d: none},
		{name: "TEST-NET-3", ip: "203.0.113.1", d: none},
		{name: "reserved 240/4", ip: "240.0.0.1", d: none},
		{name: "local-use NAT64", ip: "64:ff9b:1::a01:203", d: none},
		{name: "discard-only", ip: "100::1", d: none},
		{name: "Teredo", ip: "2001::1", d: none},
		{name: "benchmarking v6", ip: "2001:2::1", d: none},
		{name: "ORCHID", ip: "2001:10::1", d: none},
		{name: "documentation v6", ip: "2001:db8::1", d: none},
		{name: "documentation v6 3fff", ip: "3fff::1", d: none},
		{name: "SRv6 SIDs", ip: "5f00::1", d: none},
		{name: "site-local", ip: "fec0::1", d: none},

		// The allowlist opens what it names, and nothing else.
		{name: "allowlisted 10/8", ip: "10.1.2.3", d: allow("10.0.0.0/8"), want: true},
		{name: "allowlisted /32", ip: "10.1.2.3", d: allow("10.1.2.3/32"), want: true},
		{name: "next to an allowlisted /32", ip: "10.1.2.4", d: allow("10.1.2.3/32")},
		{name: "allowlisted, mapped", ip: "::ffff:10.1.2.3", d: allow("10.0.0.0/8"), want: true},
		{name: "allowlisted, through NAT64", ip: "64:ff9b::a01:203", d: allow("10.0.0.0/8"), want: true},
		{name: "another private network stays closed", ip: "192.168.1.1", d: allow("10.0.0.0/8")},
		{name: "allowlisted 192.168.1/24", ip: "192.168.1.20", d: allow("10.0.0.0/8", "192.168.1.0/24"), want: true},
		{name: "allowlisted ULA", ip: "fd12:3456::1", d: allow("fd12:3456::/32"), want: true},
		{name: "allowlisted metadata", ip: "169.254.169.254", d: allow("169.254.169.254/32"), want: true},
		{name: "allowlisted CGNAT", ip: "100.64.0.1", d: allow("100.64.0.0/10"), want: true},
		{name: "v4 allowlist does not open v6", ip: "fd00::1", d: allow("0.0.0.0/0")},
		{name: "everything allowlisted", ip: "172.16.0.1", d: allow("0.0.0.0/0"), want: true},
		{name: "allowlisted loopback", ip: "127.0.0.1", d: allow("127.0.0.0/8"), want: true},
		{name: "allowlisted loopback /32", ip: "127.0.0.1", d: allow("127.0.0.1/32"), want: true},
		{name: "allowlisted ::1", ip: "::1", d: allow("::1/128"), want: true},
		{name: "a broad allowlist does not open loopback", ip: "127.0.0.1", d: allow("0.0.0.0/0")},
		{name: "a broad v6 allowlist does not open ::1", ip: "::1", d: allow("::/0")},
		{name: "the zero address", ip: "", d: loop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ip netip.Addr
			if tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			assert.Equal(t, tt.want, tt.d.Permits(ip), "%s", tt.ip)
			// The dial hook agrees, with one error for every refusal.
			err := tt.d.control("tcp", netip.AddrPortFrom(ip, 443).String(), nil)
			if tt.want {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, errDestinationNotAllowed)
			}
		})
	}
}

// TestDestinationsControlFailsClosed: an address the hook cannot read is
// refused.
func TestDestinationsControlFailsClosed(t *testing.T) {
	t.Parallel()
	for _, address := range []string{"", "hooks.example.com:443", "10.0.0.1", "[::1]"} {
		assert.ErrorIs(t, Destinations{AllowLoopback: true, Allowed: prefixes("0.0.0.0/0")}.control("tcp", address, nil),
			errDestinationNotAllowed, "%q", address)
	}
}

// TestDestinationsCheckHost is the early check at registration: address
// literals and localhost; other names wait for the dial.
func TestDestinationsCheckHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		d       Destinations
		refused bool
	}{
		{url: "https://hooks.example.com/rx"},
		{url: "https://internal.example.com/rx"}, // judged when dialled
		{url: "https://93.184.216.34/rx"},
		{url: "https://[2606:2800:220:1:248:1893:25c8:1946]/rx"},
		{url: "https://10.0.0.5/rx", refused: true},
		{url: "https://10.0.0.5:8443/rx", d: Destinations{Allowed: prefixes("10.0.0.0/8")}},
		{url: "https://169.254.169.254/latest/meta-data/", refused: true},
		{url: "https://[fd00:ec2::254]/", refused: true},
		{url: "https://[::ffff:192.168.0.1]/", refused: true},
		{url: "https://[fe80::1%25eth0]/", refused: true},
		{url: "https://0.0.0.0/", refused: true},
		{url: "https://127.0.0.1:9000/", refused: true},
		{url: "https://127.0.0.1:9000/", d: Destinations{AllowLoopback: true}},
		{url: "http://127.0.0.1:9000/", d: Destinations{AllowLoopback: true}},
		{url: "https://localhost:9000/", refused: true},
		{url: "https://LOCALHOST./", refused: true},
		{url: "https://api.localhost/", refused: true},
		{url: "https://localhost:9000/", d: Destinations{AllowLoopback: true}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			err := tt.d.CheckHost(tt.url)
			if !tt.refused {
				assert.NoError(t, err)
				return
			}
			var ue *URLError
			if assert.True(t, errors.As(err, &ue), "%v", err) {
				assert.Contains(t, ue.Reason, "must not be a loopback, private, link-local or other non-public address")
			}
		})
	}
}

// TestDescribeRefusedDestination: a refused dial is described by one fixed
// text, whatever wraps it.
func TestDescribeRefusedDestination(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&url.Error{Op: "Post", URL: "https://10.0.0.1:22/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errDestinationNotAllowed}},
		&url.Error{Op: "Post", URL: "https://10.0.0.1:8443/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.Join(errDestinationNotAllowed, context.DeadlineExceeded)}},
	} {
		assert.Equal(t, DestinationNotAllowed, describe(response{err: err}, time.Second))
	}
	assert.Equal(t, outcomeRetry, classify(response{err: errDestinationNotAllowed}), "retried like a refused connection")
}

// TestClientRefusesBeforeConnecting dials through the delivery client's
// transport: a refused address gets the fixed error and no connection.
func TestClientRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	client, err := newClient("", 1, 5*time.Second, Destinations{})
	require.NoError(t, err)
	// A proxy would connect for us, out of the dial hook's sight.
	assert.Nil(t, client.Transport.(schemeRouter).https.Proxy, "no proxy, from the environment or elsewhere")
	resp := send(t.Context(), client, "https://"+ln.Addr().String()+"/hook", []byte("{}"), nil, 5*time.Second, time.Now())
	assert.Zero(t, resp.status)
	assert.Equal(t, DestinationNotAllowed, describe(resp, 5*time.Second))
	select {
	case <-accepted:
		t.Fatal("the refused address was connected to")
	default:
	}
}
