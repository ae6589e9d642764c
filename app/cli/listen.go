package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/queue/signature"
)

// Listen runs a local webhook receiver on 127.0.0.1 that accepts
// deliveries at /, verifies each signature with the secrets given
// (several during a rotation), answers 200 or 400 (spec 6.4.4) and prints
// the event; with --explain, why a delivery failed verification.
func Listen(ctx context.Context, env Env, args []string) error {
	fs := newFlagSet("listen", env.Stderr)
	port := fs.Int("port", 9000, "port on 127.0.0.1 (0 picks a free one)")
	var secrets multiFlag
	fs.Var(&secrets, "secret", "webhook secret shown when the endpoint was registered or rotated, whsec_... on the standard scheme (repeatable)")
	explain := fs.Bool("explain", false, "for a delivery that fails verification, print why, as far as can be told locally")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(secrets) == 0 {
		return errors.New("listen: --secret is required (the secret shown when the endpoint was registered)")
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("listen: --port must be from 0 to 65535, got %d", *port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	stdout := env.Stdout
	var mu sync.Mutex
	rcv := &receiver.Receiver{Secrets: secrets, NoRecord: true, Explain: *explain, OnDelivery: func(d receiver.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		printDelivery(stdout, d)
	}}
	mux := http.NewServeMux()
	mux.Handle("/{$}", rcv)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/"
	mu.Lock()
	fmt.Fprintf(stdout, "rxgate listen: receiving webhooks at %s (verifying with %d secret(s)). Ctrl-C stops it.\n", url, len(secrets))
	fmt.Fprintf(stdout, "Both signature schemes are accepted: X-Webhook-Signature (rxgate), or webhook-signature (Standard Webhooks, with a whsec_ secret).\n")
	if *explain {
		fmt.Fprintf(stdout, "--explain: a rejected delivery is followed by \"why:\" lines; secrets are named first, second, ... in the order of --secret.\n")
	}
	fmt.Fprintf(stdout, "Point an endpoint at it (webhooks.allow_insecure_loopback must be on, as in the sandbox):\n")
	fmt.Fprintf(stdout, "  POST /admin/v1/webhook-endpoints {\"partner_id\": \"<partner id>\", \"url\": %q}\n\n", url)
	mu.Unlock()
	// The server's goroutine is this function's: it returns only after
	// Serve has.
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("listen: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	return err
}

// printDelivery writes one delivery: a summary line, then the body.
func printDelivery(w io.Writer, d receiver.Delivery) {
	var ev struct {
		EventType string `json:"event_type"`
	}
	_ = json.Unmarshal(d.Body, &ev)
	verdict := "signature ok"
	if d.Standard {
		verdict = "standard signature ok"
	}
	if d.Err != nil {
		verdict = "rejected: " + d.Err.Error()
	}
	fmt.Fprintf(w, "%s  %d  %s  event_id=%s  %s\n", d.ReceivedAt.UTC().Format(time.RFC3339), d.Status, ev.EventType, d.EventID, verdict)
	if d.Diagnosis != nil {
		printDiagnosis(w, d.Diagnosis)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, d.Body, "  ", "  ") == nil {
		fmt.Fprintf(w, "  %s\n\n", pretty.String())
		return
	}
	fmt.Fprintf(w, "  %q\n\n", d.Body)
}

// printDiagnosis writes the findings of a local diagnosis, one a line.
// The secrets are named by the order of --secret.
func printDiagnosis(w io.Writer, diag *signature.Diagnosis) {
	if len(diag.Findings) == 0 {
		fmt.Fprintf(w, "  why: nothing more can be told locally: POST the header and body to /admin/v1/webhook-endpoints/<id>/diagnose, which compares them with the bytes signed\n")
	}
	for _, f := range diag.Findings {
		classes := ""
		if len(f.Classes) > 0 {
			classes = " (" + strings.Join(f.Classes, ", ") + ")"
		}
		fmt.Fprintf(w, "  why: [%s%s] %s\n", f.Code, classes, f.Message)
	}
}
