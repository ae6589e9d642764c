//go:build linux

package postgres

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPooledConnectionsKeepAlive: a pooled connection's socket carries
// the keepalives NetworkTimeout asks for (keepalives), so that rxgate
// notices a server gone silent in seconds, not the system's two hours;
// without a network timeout it keeps the system's settings, not Go's.
func TestPooledConnectionsKeepAlive(t *testing.T) {
	for _, tt := range []struct {
		network                time.Duration
		idle, interval, probes int
	}{
		{network: 30 * time.Second, idle: 15, interval: 3, probes: 5},
		{network: 0, idle: sysctl(t, "tcp_keepalive_time"), interval: sysctl(t, "tcp_keepalive_intvl"),
			probes: sysctl(t, "tcp_keepalive_probes")},
	} {
		t.Run(fmt.Sprint(tt.network), func(t *testing.T) {
			ctx := t.Context()
			s := openInternal(t, Options{NetworkTimeout: tt.network})
			c, err := s.pool.Acquire(ctx)
			require.NoError(t, err)
			defer c.Release()
			conn := c.Conn().PgConn().Conn()
			if tc, ok := conn.(*tls.Conn); ok {
				conn = tc.NetConn()
			}
			tcp, ok := conn.(*net.TCPConn)
			if !ok {
				t.Skipf("RXGATE_TEST_POSTGRES_URL connects over %T, not TCP: keepalives are TCP's", conn)
			}
			raw, err := tcp.SyscallConn()
			require.NoError(t, err)
			opt := func(level, name int) int {
				var v int
				var serr error
				require.NoError(t, raw.Control(func(fd uintptr) { v, serr = syscall.GetsockoptInt(int(fd), level, name) }))
				require.NoError(t, serr)
				return v
			}
			require.Equal(t, 1, opt(syscall.SOL_SOCKET, syscall.SO_KEEPALIVE), "SO_KEEPALIVE")
			require.Equal(t, tt.idle, opt(syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE), "TCP_KEEPIDLE")
			require.Equal(t, tt.interval, opt(syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL), "TCP_KEEPINTVL")
			require.Equal(t, tt.probes, opt(syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT), "TCP_KEEPCNT")
		})
	}
}

// sysctl reads one of Linux's TCP settings, net.ipv4.<name>.
func sysctl(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return n
}
