// Command barepage is the bare handler `make bench-read` compares the
// product with: an Echo server, nothing else, answering every GET with
// the bytes of a file as application/json, the physical limit of the
// framework for the page the product serves. It is a benchmark's tool,
// never built into the product.
//
//	barepage -listen 127.0.0.1:0 -body page.json
//
// It prints "listening on HOST:PORT" on stdout once it accepts
// connections, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/labstack/echo/v4"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	bodyPath := flag.String("body", "", "file whose bytes every GET answers")
	flag.Parse()
	body, err := os.ReadFile(*bodyPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "barepage:", err)
		os.Exit(2)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	length := strconv.Itoa(len(body))
	e.GET("/*", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderContentLength, length)
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "barepage:", err)
		os.Exit(2)
	}
	srv := &http.Server{Handler: e}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("listening on %s\n", ln.Addr())
	select {
	case <-ctx.Done():
		_ = srv.Close()
		<-done
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "barepage:", err)
			os.Exit(1)
		}
	}
}
