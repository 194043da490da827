// Package workers is the control plane's side of runs on other machines
// (docs/spec/workers.md): the NATS server it embeds (or a cluster's), the
// workers' registry and permissions, and the dispatcher, the run
// manager's host for turns on workers: it offers each turn on a NATS
// JetStream work queue, answers the workers' claims through the run
// manager, and follows each claimed turn's events and lease. The worker's
// side, and the wire both speak, are package worker's.
package workers

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"factory/internal/worker"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// The wire both sides speak is package worker's; these are its names here.
const (
	RunsStream   = worker.RunsStream
	EventsStream = worker.EventsStream
	anySubject   = worker.AnySubject
	anyConsumer  = worker.AnyConsumer
	ControlUser  = worker.ControlUser
)

var (
	hostSubject    = worker.HostSubject
	hostConsumer   = worker.HostConsumer
	controlSubject = worker.ControlSubject
	outputsBucket  = worker.OutputsBucket
	validID        = worker.ValidID
)

// Credentials are one NATS user's (worker.Credentials).
type Credentials = worker.Credentials

// Permissions are a NATS user's subjects (worker.Permissions).
type Permissions = worker.Permissions

// CredentialsFile is what factory workers create prints
// (worker.CredentialsFile).
type CredentialsFile = worker.CredentialsFile

// WorkerPermissions are a worker's subjects (worker.WorkerPermissions).
func WorkerPermissions(id string) Permissions { return worker.WorkerPermissions(id) }

// Connect opens a NATS connection (worker.Connect).
func Connect(url string, c Credentials, name string) (*nats.Conn, error) {
	return worker.Connect(url, c, name)
}

// Accounts checks who may connect to the embedded server, and gives each
// worker only its own subjects. Workers are looked up at each connection,
// so a worker created or revoked while the server runs is seen at once.
type Accounts struct {
	// Worker returns the SHA-256 of a worker's password, false for no
	// (or a revoked) worker.
	Worker func(name string) (passwordHash []byte, ok bool)
	// WorkerByNkey returns the worker whose nkey this public key is (not
	// revoked), for a worker that signs in with one.
	WorkerByNkey func(publicKey string) (name string, ok bool)
	mu           sync.Mutex
	own          []byte // the control plane's password
}

// Check is server.Authentication.
func (a *Accounts) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o == nil {
		return false
	}
	sum := sha256.Sum256([]byte(o.Password))
	a.mu.Lock()
	own := a.own
	a.mu.Unlock()
	if o.Username == ControlUser {
		ownSum := sha256.Sum256(own)
		if len(own) == 0 || subtle.ConstantTimeCompare(sum[:], ownSum[:]) != 1 {
			return false
		}
		c.RegisterUser(&server.User{Username: ControlUser})
		return true
	}
	if o.Nkey != "" {
		return a.checkNkey(c, o)
	}
	want, ok := a.Worker(o.Username)
	if !ok || !validID(o.Username) || subtle.ConstantTimeCompare(sum[:], want) != 1 {
		return false
	}
	c.RegisterUser(&server.User{Username: o.Username, Permissions: workerPermissions(o.Username)})
	return true
}

// checkNkey admits a worker that signed the server's nonce with the nkey
// it was created with.
func (a *Accounts) checkNkey(c server.ClientAuthentication, o *server.ClientOpts) bool {
	if a.WorkerByNkey == nil {
		return false
	}
	name, ok := a.WorkerByNkey(o.Nkey)
	if !ok || !validID(name) {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(o.Sig)
	if err != nil {
		if sig, err = base64.StdEncoding.DecodeString(o.Sig); err != nil {
			return false
		}
	}
	pub, err := nkeys.FromPublicKey(o.Nkey)
	if err != nil || len(c.GetNonce()) == 0 || pub.Verify(c.GetNonce(), sig) != nil {
		return false
	}
	c.RegisterUser(&server.User{Username: name, Permissions: workerPermissions(name)})
	return true
}

// ServerPermissions are p as the NATS server takes them.
func ServerPermissions(p Permissions) *server.Permissions {
	sp := &server.Permissions{Publish: &server.SubjectPermission{Allow: p.Publish}, Subscribe: &server.SubjectPermission{Allow: p.Subscribe}}
	if p.AllowResponses {
		sp.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	}
	return sp
}

func workerPermissions(id string) *server.Permissions {
	return ServerPermissions(WorkerPermissions(id))
}

// ValidID says whether a worker's name can be used.
func ValidID(id string) bool { return validID(id) }

// Embedded is the control plane's NATS server with JetStream.
type Embedded struct {
	Server *server.Server
	URL    string
	Own    Credentials
}

// StartEmbedded starts a NATS server with JetStream in this process: file
// storage under dataDir/nats, every write synced before it is
// acknowledged, listening on listen (host:port; loopback unless the
// operator says otherwise).
//
// With a storeKey, what JetStream keeps on disk (assignments hold the
// agents' environments, granted secrets included) is encrypted with it
// (AES-GCM); a store written without one is converted.
func StartEmbedded(dataDir, listen string, accounts *Accounts, ownPassword, storeKey string) (*Embedded, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--nats-listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--nats-listen %q: the port is not a number", listen)
	}
	if port != 0 {
		// Said plainly when the address is taken (the server itself
		// only fails to become ready).
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, fmt.Errorf("the embedded NATS server: %w", err)
		}
		ln.Close()
	}
	accounts.mu.Lock()
	accounts.own = []byte(ownPassword)
	accounts.mu.Unlock()
	opts := &server.Options{
		ServerName: "factory", Host: host, Port: port, JetStream: true, StoreDir: filepath.Join(dataDir, "nats"),
		SyncAlways: true, SyncInterval: time.Minute, NoSigs: true, MaxPayload: 8 << 20,
		CustomClientAuthentication: accounts, JetStreamKey: storeKey, JetStreamCipher: server.AES,
		AlwaysEnableNonce: true, // a worker's nkey signs it
	}
	if port == 0 {
		opts.Port = server.RANDOM_PORT // 0 is NATS's default port, 4222: ":0" means any here, as for a listener
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("the embedded NATS server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("the embedded NATS server did not start listening on %s", listen)
	}
	return &Embedded{Server: s, URL: "nats://" + s.Addr().String(), Own: Credentials{User: ControlUser, Password: ownPassword}}, nil
}

// Connected says whether a user has a connection to the server now.
func (e *Embedded) Connected(user string) bool {
	cz, err := e.Server.Connz(&server.ConnzOptions{Username: true, User: user})
	return err == nil && cz.NumConns > 0
}

// Disconnect closes every connection of a user now (a revoked worker's:
// its reconnections are refused at authentication).
func (e *Embedded) Disconnect(user string) {
	cz, err := e.Server.Connz(&server.ConnzOptions{Username: true, User: user, Limit: 1 << 16})
	if err != nil {
		return
	}
	for _, c := range cz.Conns {
		_ = e.Server.DisconnectClientByID(c.Cid)
	}
}

// Shutdown stops the server after its clients.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
}
