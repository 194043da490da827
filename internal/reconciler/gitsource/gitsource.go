// Package gitsource reads factory revisions from git remotes. It is the
// only package that imports go-git.
//
// Every fetch asks the remote for its refs first (ls-remote); when the ref
// still points at the commit read last time, that revision is returned
// without cloning. Otherwise the commit is cloned into memory, shallowly
// for branches and tags, and only factory.yaml, webhooks/ and
// automations/ are read from its tree.
package gitsource

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/schema"
)

// Credential returns the secret used to reach the remote, or nil for none:
// for HTTPS a token ("user:token", or a bare token used with the user
// "git"), for SSH a private key in PEM form.
type Credential func() ([]byte, error)

// Source is a factory in a git remote, at a branch, a tag or a pinned
// commit (40 hex digits). An empty Ref follows the remote's HEAD.
type Source struct {
	URL        string
	Ref        string
	Credential Credential

	mu    sync.Mutex
	last  *reconciler.Snapshot
	hash  plumbing.Hash
	clone atomic.Int64
}

// String names the source for logs, status and the API: the URL with any
// credential in it redacted.
func (s *Source) String() string {
	u := Redact(s.URL)
	if s.Ref == "" {
		return u
	}
	return u + "@" + s.Ref
}

// Redact hides the credential of a URL: its password, and on http(s) its
// user too (https://TOKEN@host/repo is how tokens are often given). An SSH
// user (git@host:repo) is not a secret and stays.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else if u.Scheme == "http" || u.Scheme == "https" {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// redacted is an error whose text has the source's URL redacted: the git
// library's errors may quote the URL, credential included.
type redacted struct {
	err       error
	url, safe string
}

func (e *redacted) Error() string { return strings.ReplaceAll(e.err.Error(), e.url, e.safe) }
func (e *redacted) Unwrap() error { return e.err }

// Fetch returns the revision the ref points at. Its errors never show the
// URL's credential.
func (s *Source) Fetch(ctx context.Context) (*reconciler.Snapshot, error) {
	snap, err := s.fetch(ctx)
	if err != nil {
		if safe := Redact(s.URL); safe != s.URL {
			return nil, &redacted{err: err, url: s.URL, safe: safe}
		}
		return nil, err
	}
	return snap, nil
}

// RemoteURL is the remote's URL, for the push receiver to match.
func (s *Source) RemoteURL() string { return s.URL }

// RemoteRef is the followed ref ("" for the remote's HEAD).
func (s *Source) RemoteRef() string { return s.Ref }

// Clones counts the clones made so far (an unchanged head makes none).
func (s *Source) Clones() int64 { return s.clone.Load() }

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// IsGitURL reports whether a source string names a git remote rather than
// a directory.
func IsGitURL(s string) bool {
	return regexp.MustCompile(`^([a-z][a-z0-9+.-]*://|[^/\s]+@[^/\s]+:)`).MatchString(s) || strings.HasSuffix(s, ".git")
}

func (s *Source) fetch(ctx context.Context) (*reconciler.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	auth, err := s.auth()
	if err != nil {
		return nil, err
	}
	hash, refName, err := s.resolve(ctx, auth)
	if err != nil {
		return nil, err
	}
	if s.last != nil && hash == s.hash {
		return s.last, nil
	}
	snap, err := s.read(ctx, auth, hash, refName)
	if err != nil {
		return nil, err
	}
	s.last, s.hash = snap, hash
	return snap, nil
}

func (s *Source) auth() (transport.AuthMethod, error) {
	if s.Credential == nil {
		return nil, nil
	}
	secret, err := s.Credential()
	if err != nil || secret == nil {
		return nil, err
	}
	ep, err := transport.NewEndpoint(s.URL)
	if err != nil {
		return nil, fmt.Errorf("git URL %s: %w", s.URL, err)
	}
	switch ep.Protocol {
	case "ssh":
		user := ep.User
		if user == "" {
			user = "git"
		}
		// Host keys are checked against known_hosts (SSH_KNOWN_HOSTS or
		// ~/.ssh/known_hosts): an unknown host is refused.
		keys, err := gitssh.NewPublicKeys(user, secret, "")
		if err != nil {
			return nil, fmt.Errorf("the git credential is not a usable SSH private key: %w", err)
		}
		return keys, nil
	case "http", "https":
		user, token, found := strings.Cut(strings.TrimSpace(string(secret)), ":")
		if !found {
			user, token = "git", user
		}
		return &githttp.BasicAuth{Username: user, Password: token}, nil
	}
	return nil, nil
}

// resolve finds the commit the ref points at with one ls-remote.
func (s *Source) resolve(ctx context.Context, auth transport.AuthMethod) (plumbing.Hash, plumbing.ReferenceName, error) {
	if fullSHA.MatchString(s.Ref) {
		return plumbing.NewHash(s.Ref), "", nil
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return plumbing.ZeroHash, "", fmt.Errorf("list refs of %s: %w", s.URL, err)
	}
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	if s.Ref == "" {
		head := byName[plumbing.HEAD]
		if head == nil {
			// A HEAD that points at a missing branch is not listed at all.
			if b := defaultBranch(byName); b != nil {
				return b.Hash(), b.Name(), nil
			}
			return plumbing.ZeroHash, "", fmt.Errorf("%s has no HEAD: name a branch with ref (it has %s)", s.URL, branchNames(byName))
		}
		if head.Type() == plumbing.SymbolicReference {
			target := byName[head.Target()]
			if target == nil {
				// A bare repository made with an older git points HEAD at
				// master while only main was pushed: take the one branch
				// that is there, or main, rather than fail.
				if target = defaultBranch(byName); target == nil {
					return plumbing.ZeroHash, "", fmt.Errorf("%s: HEAD points at %s, which does not exist: name a branch with ref (it has %s)", s.URL, head.Target(), branchNames(byName))
				}
			}
			return target.Hash(), target.Name(), nil
		}
		return head.Hash(), plumbing.HEAD, nil
	}
	if r := byName[plumbing.NewBranchReferenceName(s.Ref)]; r != nil {
		return r.Hash(), r.Name(), nil
	}
	tag := plumbing.NewTagReferenceName(s.Ref)
	if r := byName[plumbing.ReferenceName(string(tag)+"^{}")]; r != nil { // annotated: the commit
		return r.Hash(), tag, nil
	}
	if r := byName[tag]; r != nil {
		return r.Hash(), tag, nil
	}
	return plumbing.ZeroHash, "", fmt.Errorf("%s has no branch or tag %q", s.URL, s.Ref)
}

func (s *Source) read(ctx context.Context, auth transport.AuthMethod, hash plumbing.Hash, refName plumbing.ReferenceName) (*reconciler.Snapshot, error) {
	opts := &git.CloneOptions{URL: s.URL, Auth: auth, NoCheckout: true, Tags: git.AllTags}
	if refName != "" && refName != plumbing.HEAD {
		opts.ReferenceName, opts.SingleBranch, opts.Depth, opts.Tags = refName, true, 1, git.NoTags
	}
	s.clone.Add(1)
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, opts)
	if err != nil {
		return nil, fmt.Errorf("clone %s: %w", s.URL, err)
	}
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("%s: commit %s: %w", s.URL, hash, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, err
	}
	snap := &reconciler.Snapshot{Files: map[string][]byte{}, Revision: "sha1:" + hash.String()}
	if refName != "" && refName != plumbing.HEAD {
		snap.Revision = refName.Short() + "@sha1:" + hash.String()
	}
	r := treeReader{repo: repo, tree: tree, snap: snap, budget: &reconciler.Budget{}}
	r.file(factory.SettingsFile, true)
	for _, e := range tree.Entries {
		switch {
		case strings.HasPrefix(e.Name, "."):
		case factory.IsKnownDir(e.Name):
			r.dir(e.Name, 1)
		case e.Mode == filemode.Dir:
			snap.OtherDirs = append(snap.OtherDirs, e.Name)
		}
	}
	return snap, nil
}

type treeReader struct {
	repo   *git.Repository
	tree   *object.Tree
	snap   *reconciler.Snapshot
	budget *reconciler.Budget
}

func (r *treeReader) problem(rel, msg string) {
	r.snap.Diagnostics = append(r.snap.Diagnostics, schema.Diagnostic{File: rel, Message: msg, Severity: schema.Error})
}

// dir reads every file under rel, a folder depth levels below the root.
func (r *treeReader) dir(rel string, depth int) {
	entry, err := r.tree.FindEntry(rel)
	if err != nil {
		r.problem(rel, err.Error())
		return
	}
	if entry.Mode != filemode.Dir {
		r.file(rel, false)
		return
	}
	if depth > factory.MaxTreeDepth {
		r.problem(rel, fmt.Sprintf("folders nest deeper than %d levels here; nothing below is read", factory.MaxTreeDepth))
		return
	}
	sub, err := r.tree.Tree(rel)
	if err != nil {
		r.problem(rel, err.Error())
		return
	}
	for _, e := range sub.Entries {
		if !strings.HasPrefix(e.Name, ".") {
			r.dir(rel+"/"+e.Name, depth+1)
		}
	}
}

// file reads one definition file from the tree, with the same refusals as
// a directory source: links out of the repository, non-files, big files.
func (r *treeReader) file(name string, optional bool) {
	rel := name
	for hops := 0; ; hops++ {
		entry, err := r.tree.FindEntry(rel)
		if err != nil {
			if !optional {
				r.problem(name, "symlink target "+rel+" is not in the commit")
			}
			return
		}
		switch entry.Mode {
		case filemode.Regular, filemode.Executable:
		case filemode.Symlink:
			target, err := r.blob(entry.Hash, 4096)
			if err != nil {
				r.problem(rel, err.Error())
				return
			}
			next := path.Clean(path.Join(path.Dir(rel), string(target)))
			if path.IsAbs(string(target)) || next == ".." || strings.HasPrefix(next, "../") || hops > 8 {
				r.problem(name, "symlink leads outside the repository")
				return
			}
			rel, optional = next, false
			continue
		case filemode.Dir:
			r.problem(name, "not a file: a folder, or a symlink to one")
			return
		default:
			r.problem(name, "not a regular file (a submodule?)")
			return
		}
		b, err := r.budgeted(name, entry.Hash)
		if err != nil {
			r.problem(name, err.Error())
			return
		}
		if b != nil {
			r.snap.Files[name] = b
		}
		return
	}
}

// budgeted reads a definition's blob if the revision's budget allows it:
// nil without an error when an earlier file exceeded it.
func (r *treeReader) budgeted(name string, h plumbing.Hash) ([]byte, error) {
	obj, err := r.repo.BlobObject(h)
	if err != nil {
		return nil, err
	}
	if obj.Size <= factory.MaxDefinitionFileBytes {
		if report, ok := r.budget.Take(obj.Size); !ok {
			return nil, report
		}
	}
	b, err := r.blob(h, factory.MaxDefinitionFileBytes)
	if err == nil && b == nil {
		b = []byte{}
	}
	return b, err
}

// blob reads a blob, refusing one over limit bytes before reading it.
func (r *treeReader) blob(h plumbing.Hash, limit int64) ([]byte, error) {
	b, err := r.repo.BlobObject(h)
	if err != nil {
		return nil, err
	}
	if b.Size > limit {
		return nil, fmt.Errorf("file is %d bytes; the limit is 1 MiB", b.Size)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(io.LimitReader(rd, limit+1))
}

// defaultBranch is the branch to follow when HEAD points nowhere: the only
// branch, else main, else master; nil when it cannot tell.
func defaultBranch(refs map[plumbing.ReferenceName]*plumbing.Reference) *plumbing.Reference {
	var branches []*plumbing.Reference
	for name, r := range refs {
		if name.IsBranch() {
			branches = append(branches, r)
		}
	}
	if len(branches) == 1 {
		return branches[0]
	}
	for _, name := range []string{"main", "master"} {
		if r := refs[plumbing.NewBranchReferenceName(name)]; r != nil {
			return r
		}
	}
	return nil
}

func branchNames(refs map[plumbing.ReferenceName]*plumbing.Reference) string {
	var names []string
	for name := range refs {
		if name.IsBranch() {
			names = append(names, name.Short())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "no branches"
	}
	return "branches " + strings.Join(names, ", ")
}
