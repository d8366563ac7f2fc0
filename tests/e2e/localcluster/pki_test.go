package localcluster

import (
	"crypto/x509"
	"os"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/cert"
)

func TestPKIChainsAndKubeconfig(t *testing.T) {
	dir := t.TempDir()
	p, err := newPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := cert.NewPool(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	load := func(path string) *x509.Certificate {
		t.Helper()
		certs, err := cert.CertsFromFile(path)
		if err != nil || len(certs) != 1 {
			t.Fatalf("read %s: %v (%d certs)", path, err, len(certs))
		}
		return certs[0]
	}
	serving := load(p.ServingCert)
	if _, err := serving.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("serving cert does not verify for 127.0.0.1: %v", err)
	}

	kc := dir + "/kubeconfig-node"
	if err := p.kubeconfig(kc, "node-x", "https://127.0.0.1:6443", "system:node:node-x", "system:nodes"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos["node-x"]
	if auth == nil || cfg.Clusters["local"].Server != "https://127.0.0.1:6443" {
		t.Fatalf("kubeconfig %s: missing user or server: %+v", kc, cfg)
	}
	client := load(auth.ClientCertificate)
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert does not verify as a client: %v", err)
	}
	if client.Subject.CommonName != "system:node:node-x" || len(client.Subject.Organization) != 1 || client.Subject.Organization[0] != "system:nodes" {
		t.Errorf("client subject = %v, want CN=system:node:node-x O=system:nodes", client.Subject)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies as a server certificate")
	}
	if st, err := os.Stat(auth.ClientKey); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("client key %s: %v, mode %v; want 0600", auth.ClientKey, err, st.Mode())
	}
}
