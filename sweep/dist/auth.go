package dist

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Environment variables a client reads its user and password from.
const (
	EnvUser     = "STEPLAB_NATS_USER"
	EnvPassword = "STEPLAB_NATS_PASSWORD"
)

// Auth is how a client proves who it is to the NATS server, and how it
// checks the server: NATS's own mechanisms, at most one of credentials
// file, nkey seed file or user and password, with optional TLS.
type Auth struct {
	// Creds is a NATS credentials file (user JWT and nkey seed).
	Creds string
	// NkeySeed is a file holding a user nkey seed (SU...).
	NkeySeed string
	// User and PasswordFile: the password is read from the file (or from
	// $STEPLAB_NATS_PASSWORD), never taken as an argument.
	User, PasswordFile string
	// TLSCA verifies the server; TLSCert and TLSKey are the client's
	// certificate for servers that verify clients.
	TLSCA, TLSCert, TLSKey string
}

// WithEnv fills User and the password source from $STEPLAB_NATS_USER
// when no other identity is given.
func (a Auth) WithEnv() Auth {
	if a.User == "" && a.Creds == "" && a.NkeySeed == "" {
		a.User = os.Getenv(EnvUser)
	}
	return a
}

// Options are the nats.Connect options of a; errors name the flag.
func (a Auth) Options() ([]nats.Option, error) {
	var opts []nats.Option
	n := 0
	for _, s := range []string{a.Creds, a.NkeySeed, a.User} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("give one of --creds, --nkey or --user (with its password)")
	}
	switch {
	case a.Creds != "":
		if err := readable("--creds", a.Creds); err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.NkeySeed != "":
		o, err := nats.NkeyOptionFromSeed(a.NkeySeed)
		if err != nil {
			return nil, fmt.Errorf("--nkey %s: %w", a.NkeySeed, err)
		}
		opts = append(opts, o)
	case a.User != "":
		pw, err := a.password()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(a.User, pw))
	case a.PasswordFile != "":
		return nil, errors.New("--password-file needs --user (or $" + EnvUser + ")")
	}
	if (a.TLSCert == "") != (a.TLSKey == "") {
		return nil, errors.New("give --tls-cert and --tls-key together")
	}
	for _, f := range [][2]string{{"--tls-ca", a.TLSCA}, {"--tls-cert", a.TLSCert}, {"--tls-key", a.TLSKey}} {
		if f[1] != "" {
			if err := readable(f[0], f[1]); err != nil {
				return nil, err
			}
		}
	}
	if a.TLSCA != "" {
		opts = append(opts, nats.RootCAs(a.TLSCA))
	}
	if a.TLSCert != "" {
		opts = append(opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	return opts, nil
}

// password reads the password file (one line) or $STEPLAB_NATS_PASSWORD.
func (a Auth) password() (string, error) {
	if a.PasswordFile == "" {
		pw := os.Getenv(EnvPassword)
		if pw == "" {
			return "", fmt.Errorf("--user %s: give --password-file FILE or set $%s", a.User, EnvPassword)
		}
		return pw, nil
	}
	b, err := os.ReadFile(a.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("--password-file %s: want the password on one line", a.PasswordFile)
	}
	return pw, nil
}

func readable(flag, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return f.Close()
}

// ErrBadURL reports a queue address that is not nats:// or tls://, or
// that holds credentials.
var ErrBadURL = errors.New("bad queue address")

// Connect connects to the NATS server at raw with a's identity.
func Connect(raw, name string, a Auth) (*nats.Conn, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
		shown := "(not a URL)"
		if err == nil {
			shown = u.Redacted()
		}
		return nil, fmt.Errorf("--queue %s: %w: want nats://HOST:PORT or tls://HOST:PORT", shown, ErrBadURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("--queue %q: %w: no credentials in it; use --user with --password-file, --nkey or --creds", u.Redacted(), ErrBadURL)
	}
	opts, err := a.WithEnv().Options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	nc, err := nats.Connect(raw, opts...)
	if err != nil {
		return nil, fmt.Errorf("--queue %s: %w", raw, err)
	}
	return nc, nil
}
