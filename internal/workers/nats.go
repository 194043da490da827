// Package workers runs runs on other machines (docs/spec/workers.md): the
// control plane publishes each turn as an assignment to a NATS JetStream
// work queue, a worker claims it, runs it with the same executors as the
// control plane, and publishes its events back. NATS carries everything;
// this package adds the assignment's shape, leases and routing.
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

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Subjects and streams. Assignments: factory.runs.any (any worker) and
// factory.runs.host.<id> (the worker of that --id: a workerHost, or the
// worker that ran a run's earlier turns). Events: factory.events.<id>.
// Control (cancel, interrupt): factory.control.<id>, plain NATS.
const (
	RunsStream   = "FACTORY_RUNS"
	EventsStream = "FACTORY_EVENTS"
	anySubject   = "factory.runs.any"
	anyConsumer  = "any"
)

func hostSubject(id string) string   { return "factory.runs.host." + id }
func hostConsumer(id string) string  { return "host-" + id }
func eventsSubject(id string) string { return "factory.events." + id }
func controlSubject(id string) string {
	return "factory.control." + id
}
func inboxPrefix(id string) string { return "_INBOX_" + id }

// outputsBucket is the object store a worker puts its turns' output files
// in (one per worker: it may write to its own only); the control plane
// takes them out when it applies the turn's end.
func outputsBucket(id string) string { return "FACTORY_OUTPUTS_" + id }

// ControlUser is the control plane's own NATS user.
const ControlUser = "factory-control-plane"

// Credentials are one NATS user's: a worker's (from factory workers
// create) or the control plane's.
type Credentials struct {
	User     string `json:"user"`
	Password string `json:"password,omitempty"`
	// On a NATS cluster of its own (serve --nats) the cluster's operator
	// makes the users: a JWT credentials file or an nkey seed file, on
	// the machine that connects; or a user and password in the URL.
	CredsFile string `json:"-"`
	NkeyFile  string `json:"-"`
	// NkeySeed is the worker's own nkey (factory workers create --nkey),
	// instead of a password: its seed signs the server's challenge.
	NkeySeed string `json:"nkey_seed,omitempty"`
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

// Permissions are the subjects a NATS user may publish and subscribe to,
// everything else denied; a user may answer the requests it hears
// (AllowResponses: a worker answers the control plane's presence checks).
type Permissions struct {
	Publish        []string `json:"publish"`
	Subscribe      []string `json:"subscribe"`
	AllowResponses bool     `json:"allow_responses"`
}

// WorkerPermissions deny by default: a worker pulls from the shared queue
// and its own, acknowledges what it took, publishes its own events, and
// hears its own control subject; replies come to its own inbox. A NATS
// cluster of its own gives each worker's user these (docs/workers.md).
func WorkerPermissions(id string) Permissions {
	return Permissions{
		Publish: []string{
			"$JS.API.CONSUMER.MSG.NEXT." + RunsStream + "." + anyConsumer,
			"$JS.API.CONSUMER.MSG.NEXT." + RunsStream + "." + hostConsumer(id),
			"$JS.API.CONSUMER.INFO." + RunsStream + "." + anyConsumer,
			"$JS.API.CONSUMER.INFO." + RunsStream + "." + hostConsumer(id),
			"$JS.ACK." + RunsStream + "." + anyConsumer + ".>",
			"$JS.ACK." + RunsStream + "." + hostConsumer(id) + ".>",
			eventsSubject(id),
			// Its own object store: bind it, put files (chunks, then
			// the meta), read a name's meta, purge a failed put's chunks.
			"$JS.API.STREAM.INFO.OBJ_" + outputsBucket(id),
			"$JS.API.STREAM.MSG.GET.OBJ_" + outputsBucket(id),
			"$JS.API.DIRECT.GET.OBJ_" + outputsBucket(id) + ".>",
			"$JS.API.STREAM.PURGE.OBJ_" + outputsBucket(id),
			"$O." + outputsBucket(id) + ".>",
		},
		Subscribe:      []string{inboxPrefix(id) + ".>", controlSubject(id)},
		AllowResponses: true,
	}
}

// ServerPermissions are p as the NATS server takes them.
func (p Permissions) ServerPermissions() *server.Permissions {
	sp := &server.Permissions{Publish: &server.SubjectPermission{Allow: p.Publish}, Subscribe: &server.SubjectPermission{Allow: p.Subscribe}}
	if p.AllowResponses {
		sp.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	}
	return sp
}

func workerPermissions(id string) *server.Permissions {
	return WorkerPermissions(id).ServerPermissions()
}

// validID is what a worker's name may be: it is part of subjects.
func validID(id string) bool {
	if id == "" || len(id) > 64 || id == ControlUser {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
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

// Shutdown stops the server after its clients.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
}
