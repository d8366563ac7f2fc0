package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is long enough for an `up` cluster left running over a weekend.
const certValidity = 7 * 24 * time.Hour

// pki is the cluster's certificate authority and the paths of the files
// written from it, all under one directory of the run folder.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	// CAFile is the PEM CA certificate every component trusts.
	CAFile string
	// SAKeyFile and SAPubFile are the service-account token signing key pair.
	SAKeyFile, SAPubFile string
	// ServingCert and ServingKey are kube-apiserver's serving pair for 127.0.0.1.
	ServingCert, ServingKey string
}

// newPKI creates a CA, the service-account key pair and kube-apiserver's
// serving certificate in dir.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	caCert, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "fakecloud-csi-e2e-ca"}, key)
	if err != nil {
		return nil, fmt.Errorf("ca cert: %w", err)
	}
	p := &pki{dir: dir, caCert: caCert, caKey: key, CAFile: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(p.CAFile, pemBlock("CERTIFICATE", caCert.Raw), 0o600); err != nil {
		return nil, fmt.Errorf("write ca: %w", err)
	}

	// kube-apiserver wants RSA or ECDSA; RSA keeps the JWKS the most boring.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	p.SAKeyFile, p.SAPubFile = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return nil, fmt.Errorf("encode service-account key: %w", err)
	}
	pubPEM, err := encodePublicKeyPEM(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.SAKeyFile, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write service-account key: %w", err)
	}
	if err := os.WriteFile(p.SAPubFile, pubPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write service-account public key: %w", err)
	}

	p.ServingCert, p.ServingKey, err = p.issue("kube-apiserver", "kube-apiserver", nil, true,
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func encodePublicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pemBlock("PUBLIC KEY", der), nil
}

// issue signs a certificate for name (the file stem) with common name cn and
// organizations orgs: a client certificate, or a server one when server is set.
// It returns the certificate and key paths.
func (p *pki) issue(name, cn string, orgs []string, server bool, ips []net.IP, dns []string) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("key for %s: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", fmt.Errorf("serial for %s: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return "", "", fmt.Errorf("sign %s: %w", name, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", "", fmt.Errorf("encode key of %s: %w", name, err)
	}
	certFile, keyFile := filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := os.WriteFile(certFile, pemBlock("CERTIFICATE", der), 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}

// kubeconfig issues a client certificate for user cn in groups orgs and
// writes a kubeconfig for server at path.
func (p *pki) kubeconfig(path, name, server, cn string, orgs ...string) error {
	certFile, keyFile, err := p.issue(name, cn, orgs, false, nil, nil)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.CAFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
