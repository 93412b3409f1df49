package dist

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
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// TestConnectAuth connects with each identity NATS offers, against the
// example's server (user and password) and a server of nkey users.
func TestConnectAuth(t *testing.T) {
	s := startServer(t)
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := user.PublicKey()
	require.NoError(t, err)
	seed, err := user.Seed()
	require.NoError(t, err)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(patience))
	t.Cleanup(ns.Shutdown)
	other, err := nkeys.CreateUser()
	require.NoError(t, err)
	otherSeed, err := other.Seed()
	require.NoError(t, err)

	pw := writeFile(t, "pw", testPasswords[workerUser]+"\n")
	tests := []struct {
		name string
		url  string
		auth Auth
		env  map[string]string
		want string // "" connects
	}{
		{"password file", s.ClientURL(), Auth{User: workerUser, PasswordFile: pw}, nil, ""},
		{"user and password from the environment", s.ClientURL(), Auth{}, map[string]string{EnvUser: workerUser,
			EnvPassword: testPasswords[workerUser]}, ""},
		{"wrong password", s.ClientURL(), Auth{User: workerUser, PasswordFile: writeFile(t, "bad", "nope")}, nil, "Authorization Violation"},
		{"no identity", s.ClientURL(), Auth{}, nil, "Authorization Violation"},
		{"no password", s.ClientURL(), Auth{User: workerUser}, nil, "give --password-file FILE or set $" + EnvPassword},
		{"two-line password file", s.ClientURL(), Auth{User: workerUser, PasswordFile: writeFile(t, "two", "a\nb\n")}, nil, "want the password on one line"},
		{"nkey seed", ns.ClientURL(), Auth{NkeySeed: writeFile(t, "seed", string(seed))}, nil, ""},
		{"another nkey", ns.ClientURL(), Auth{NkeySeed: writeFile(t, "seed2", string(otherSeed))}, nil, "Authorization Violation"},
		{"not a seed", ns.ClientURL(), Auth{NkeySeed: writeFile(t, "seed3", "hello")}, nil, "--nkey"},
		{"two identities", s.ClientURL(), Auth{User: "u", NkeySeed: "s"}, nil, "give one of --creds, --nkey or --user"},
		{"missing credentials file", s.ClientURL(), Auth{Creds: filepath.Join(t.TempDir(), "none.creds")}, nil, "--creds"},
		{"password file without user", s.ClientURL(), Auth{PasswordFile: pw}, nil, "--password-file needs --user"},
		{"certificate without key", s.ClientURL(), Auth{TLSCert: pw}, nil, "give --tls-cert and --tls-key together"},
		{"missing CA", s.ClientURL(), Auth{TLSCA: filepath.Join(t.TempDir(), "ca.pem")}, nil, "--tls-ca"},
		{"credentials in the address", "nats://u:secret@127.0.0.1:1", Auth{}, nil, "no credentials in it"},
		{"not nats", "http://127.0.0.1:1", Auth{}, nil, "want nats://HOST:PORT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvUser, tc.env[EnvUser])
			t.Setenv(EnvPassword, tc.env[EnvPassword])
			nc, err := Connect(tc.url, "test", tc.auth)
			if tc.want == "" {
				require.NoError(t, err)
				nc.Close()
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "secret")
		})
	}
}

// TestConnectTLS: a server with a certificate of its own CA; the client
// verifies it with --tls-ca and presents its certificate.
func TestConnectTLS(t *testing.T) {
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "steplab test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign,
		BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	issue := func(name string, server bool) (string, string) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		c := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if server {
			c.ExtKeyUsage, c.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, c, caCert, &k.PublicKey, caKey)
		require.NoError(t, err)
		kb, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		cf, kf := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		require.NoError(t, os.WriteFile(cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
		require.NoError(t, os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
		return cf, kf
	}
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	sc, sk := issue("server", true)
	cc, ck := issue("client", false)
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: sc, KeyFile: sk, CaFile: caFile, Verify: true})
	require.NoError(t, err)
	tc.MinVersion = tls.VersionTLS12
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, TLS: true, TLSVerify: true,
		TLSConfig: tc})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(patience))
	t.Cleanup(s.Shutdown)
	url := "tls://" + s.Addr().String()
	nc, err := Connect(url, "test", Auth{TLSCA: caFile, TLSCert: cc, TLSKey: ck})
	require.NoError(t, err)
	nc.Close()
	_, err = Connect(url, "test", Auth{TLSCA: caFile})
	assert.Error(t, err, "the server verifies clients")
	_, err = Connect(url, "test", Auth{TLSCert: cc, TLSKey: ck})
	assert.Error(t, err, "the server's CA is not the system's")
}
