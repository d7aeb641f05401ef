package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartTLSServer starts a real redis-server of t's own that speaks only
// TLS (--port 0 --tls-port P), with a server certificate for 127.0.0.1
// signed by a throwaway CA made for it, and stops it at the end of t; args
// are appended to its command line. The returned Server's TLS trusts that
// CA only, so every client of it (Client, Admin, Keys) verifies the
// server. Like Real, it skips t when no redis-server can be had, or fails
// t with RELOCK_REQUIRE_REDIS=1.
func StartTLSServer(t testing.TB, args ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	pool, err := writeCerts(dir)
	if err != nil {
		t.Fatalf("make TLS certificates: %v", err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	cmd, addr, err := launchTLS(dir, cfg, args...)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &Server{Addr: addr, TLS: cfg}
}

// launchTLS is launch for a TLS-only server whose ca.crt, redis.crt and
// redis.key are in dir.
func launchTLS(dir string, cfg *tls.Config, args ...string) (*exec.Cmd, string, error) {
	return launchOn(dir, cfg, func(port int) []string {
		return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", filepath.Join(dir, "redis.crt"),
			"--tls-key-file", filepath.Join(dir, "redis.key"),
			"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"),
			"--tls-auth-clients", "no"}
	}, args...)
}

// writeCerts makes a CA and a server certificate for IP 127.0.0.1 signed
// by it (ECDSA P-256, valid for a day), writes ca.crt, redis.crt and
// redis.key (PEM) into dir, and returns a pool holding the CA.
func writeCerts(dir string) (*x509.CertPool, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "relock test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name, typ string
		der       []byte
	}{
		{"ca.crt", "CERTIFICATE", caDER},
		{"redis.crt", "CERTIFICATE", srvDER},
		{"redis.key", "PRIVATE KEY", keyDER},
	} {
		data := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(filepath.Join(dir, f.name), data, 0o600); err != nil {
			return nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, nil
}
