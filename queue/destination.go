package queue

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// DestinationNotAllowed is the whole error of an attempt whose connection
// the destination policy refused. It is one fixed text, whatever the
// address, port or state of the host, so that the event log cannot be used
// to probe a network the operator did not open.
const DestinationNotAllowed = "destination address not allowed"

// errDestinationNotAllowed is a dial refused by Destinations.
var errDestinationNotAllowed = errors.New(DestinationNotAllowed)

// Destinations is the policy on the addresses a delivery may connect to.
// Deliveries go to partners on the public internet: an endpoint URL must
// not make the server reach its own host, its private network or a cloud
// provider's metadata service (server-side request forgery), nor learn
// from the attempts' errors which of their ports answer.
//
// The policy is applied to the address actually dialled, after name
// resolution (net.Dialer.Control), so a name that resolves, or rebinds
// between a check and the dial, to a refused address cannot pass.
//
// Refused, in this order:
//   - never, whatever the settings, as no receiver can be there: the
//     unspecified addresses and "this network" (0.0.0.0/8, ::; a dial to
//     0.0.0.0 reaches the host itself), multicast (224.0.0.0/4, ff00::/8)
//     and the limited broadcast address (255.255.255.255);
//   - loopback (127.0.0.0/8, ::1), unless AllowLoopback, or an entry of
//     Allowed that lies inside loopback (a broad entry such as 0.0.0.0/0
//     does not open the host's own services);
//   - the ranges of nonPublic (private, shared CGNAT, link-local with the
//     cloud metadata services, documentation, benchmarking, reserved and
//     their IPv6 counterparts), unless an entry of Allowed holds the
//     address.
//
// IPv4 addresses written in IPv6 are judged as the IPv4 address they
// carry: IPv4-mapped (::ffff:0:0/96) and the NAT64 well-known prefix
// (64:ff9b::/96, through which an IPv6-only host reaches IPv4 receivers,
// so it cannot simply be refused). Zones are ignored (fe80::1%eth0 is
// link-local).
type Destinations struct {
	// AllowLoopback lets deliveries connect to loopback addresses
	// (webhooks.allow_insecure_loopback).
	AllowLoopback bool
	// Allowed are networks deliveries may connect to although nonPublic
	// holds them: an on-premise operator's own receivers
	// (webhooks.allowed_networks).
	Allowed []netip.Prefix
}

// never holds the addresses no delivery connects to, whatever the settings.
var never = prefixes(
	"0.0.0.0/8",          // "this network", 0.0.0.0 unspecified (RFC 791, 1122)
	"::/128",             // unspecified
	"224.0.0.0/4",        // multicast
	"ff00::/8",           // multicast
	"255.255.255.255/32", // limited broadcast (RFC 919)
)

// loopback is the host itself.
var loopback = prefixes(
	"127.0.0.0/8", // RFC 1122
	"::1/128",
)

// nonPublic holds the ranges IANA's special-purpose registries (RFC 6890
// and its updates) mark as not globally reachable, or that no partner's
// receiver can be at, besides never and loopback.
var nonPublic = prefixes(
	// IPv4
	"10.0.0.0/8",       // private (RFC 1918)
	"100.64.0.0/10",    // shared address space, CGNAT (RFC 6598); Alibaba Cloud's metadata is 100.100.100.200
	"169.254.0.0/16",   // link-local (RFC 3927); AWS, GCP, Azure and OpenStack metadata is 169.254.169.254
	"172.16.0.0/12",    // private (RFC 1918)
	"192.0.0.0/24",     // IETF protocol assignments (RFC 6890); Oracle Cloud's legacy metadata is 192.0.0.192
	"192.0.2.0/24",     // documentation, TEST-NET-1 (RFC 5737)
	"192.88.99.0/24",   // 6to4 relay anycast, deprecated (RFC 7526)
	"192.168.0.0/16",   // private (RFC 1918)
	"198.18.0.0/15",    // benchmarking (RFC 2544)
	"198.51.100.0/24",  // documentation, TEST-NET-2 (RFC 5737)
	"203.0.113.0/24",   // documentation, TEST-NET-3 (RFC 5737)
	"240.0.0.0/4",      // reserved (RFC 1112)
	"168.63.129.16/32", // Azure's platform endpoint (WireServer): public on paper, reachable from Azure hosts only
	// IPv6
	"::/96",          // IPv4-compatible, deprecated (RFC 4291)
	"64:ff9b:1::/48", // local-use NAT64 (RFC 8215)
	"100::/64",       // discard-only (RFC 6666)
	"2001::/32",      // Teredo (RFC 4380): tunnels to an IPv4 address
	"2001:2::/48",    // benchmarking (RFC 5180)
	"2001:10::/28",   // ORCHID, deprecated (RFC 4843)
	"2001:db8::/32",  // documentation (RFC 3849)
	"2002::/16",      // 6to4, deprecated (RFC 7526): tunnels to an IPv4 address
	"3fff::/20",      // documentation (RFC 9637)
	"5f00::/16",      // SRv6 SIDs (RFC 9602)
	"fc00::/7",       // unique local (RFC 4193); AWS's IPv6 metadata is fd00:ec2::254
	"fe80::/10",      // link-local
	"fec0::/10",      // site-local, deprecated (RFC 3879)
)

// nat64 is the NAT64 well-known prefix (RFC 6052): the last 32 bits are
// the IPv4 address reached.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func prefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// Permits reports whether a delivery may connect to ip.
func (d Destinations) Permits(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	ip = ip.WithZone("").Unmap() // a zoned address matches no prefix
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case holds(never, ip):
		return false
	case holds(loopback, ip):
		if d.AllowLoopback {
			return true
		}
		for _, a := range d.Allowed {
			if a.Contains(ip) && insideAny(a, loopback) {
				return true
			}
		}
		return false
	case holds(nonPublic, ip):
		return holds(d.Allowed, ip)
	}
	return true
}

// control is the net.Dialer.Control of deliveries: it refuses a connection
// to an address d does not permit, before the connection is attempted.
func (d Destinations) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !d.Permits(ap.Addr()) {
		return errDestinationNotAllowed
	}
	return nil
}

// CheckHost is early feedback at registration for an endpoint URL CheckURL
// accepted: it refuses a URL whose host is an IP address d does not permit,
// or localhost (RFC 6761) when d does not permit loopback. Other names are
// judged only when dialled, since what they resolve to may change. The
// error's text is safe to show to the operator.
func (d Destinations) CheckHost(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &URLError{"must be an absolute https URL"}
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	var ip netip.Addr
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		if ip, err = netip.ParseAddr(host); err != nil {
			return nil
		}
	}
	if !d.Permits(ip) {
		return &URLError{"must not be a loopback, private, link-local or other non-public address " +
			"(webhooks.allowed_networks opens a network, webhooks.allow_insecure_loopback loopback)"}
	}
	return nil
}

// holds reports whether one of ps contains ip.
func holds(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// insideAny reports whether p lies entirely inside one of ps.
func insideAny(p netip.Prefix, ps []netip.Prefix) bool {
	for _, q := range ps {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}
