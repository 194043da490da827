package reconciler

import (
	"fmt"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"

	"factory"
	"factory/internal/schema"
)

// Desired is a factory revision as its files define it, validated.
type Desired struct {
	Revision    string
	Settings    schema.FactoryFile
	Webhooks    []*schema.Webhook    // by key
	Automations []*schema.Automation // by key
	// Broken holds the paths of definition files that have errors. They
	// are neither applied nor deleted: a plan of a revision with broken
	// files still checks the other files, but is not applied.
	Broken map[string]bool
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidName reports whether s can name a factory, a webhook or an automation.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// Load parses and validates every file of a snapshot and reports every
// problem of every file, sorted by file and position. Desired holds the
// files that are valid; with any error the revision must not be applied.
func Load(snap *Snapshot) (*Desired, schema.Diagnostics) { return (*Loader)(nil).Load(snap) }

// Loader is Load with a memory of parsed files: a file whose path and
// content are unchanged since the last load is not parsed again, so a
// commit that changes one file of a thousand parses one. The zero value is
// ready; a nil *Loader keeps no memory.
type Loader struct {
	mu    sync.Mutex
	cache map[string]parsed
}

type parsed struct {
	webhook    *schema.Webhook
	automation *schema.Automation
	diags      schema.Diagnostics
}

func cacheKey(file string, data []byte) string { return file + "\x00" + string(data) }

// Load is the package's Load, using and refreshing the loader's memory.
// Its steps: sort the snapshot's files into definitions (checking names
// and counts), parse each (in parallel, or from memory), then assemble the
// revision and check what spans files (webhook names).
func (l *Loader) Load(snap *Snapshot) (*Desired, schema.Diagnostics) {
	ds := append(schema.Diagnostics{}, snap.Diagnostics...)
	d := &Desired{Revision: snap.Revision, Broken: map[string]bool{}}
	for _, sd := range snap.Diagnostics {
		d.Broken[sd.File] = true
	}
	jobs, fds := d.definitions(snap)
	ds = append(ds, fds...)
	results := l.parse(jobs)
	ds = append(ds, d.assemble(jobs, results)...)
	ds.Sort()
	return d, ds
}

// loadJob is one definition file to parse.
type loadJob struct {
	file, key, dir string
	data           []byte
}

// definitions reads factory.yaml into d and lists the definition files to
// parse, in path order. A file with a wrong name, or a webhook over the
// limit, is broken and reported.
func (d *Desired) definitions(snap *Snapshot) ([]loadJob, schema.Diagnostics) {
	var ds schema.Diagnostics
	var jobs []loadJob
	paths := make([]string, 0, len(snap.Files))
	for p := range snap.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	webhookFiles := 0
	for _, p := range paths {
		data := snap.Files[p]
		if p == factory.SettingsFile {
			f, fds := schema.ParseFactoryFile(p, data)
			ds = append(ds, fds...)
			if f != nil {
				d.Settings = *f
			}
			continue
		}
		dir, base := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		ext := factory.DefinitionExt(dir)
		if ext == "" {
			continue
		}
		key, ok := strings.CutSuffix(base, ext)
		var problem string
		switch {
		case !ok:
			problem = fmt.Sprintf("unexpected file: %s/ holds only <name>%s files", dir, ext)
		case !ValidName(key):
			problem = fmt.Sprintf("file name %q must match %s: lowercase letters, digits and '-', at most 63", key, namePattern)
		case dir == factory.WebhooksDir:
			if webhookFiles++; webhookFiles > factory.MaxWebhooksPerFactory {
				problem = fmt.Sprintf("too many webhooks: a factory has at most %d (this is webhook %d)", factory.MaxWebhooksPerFactory, webhookFiles)
			}
		}
		if problem != "" {
			d.Broken[p] = true
			ds = append(ds, fileError(p, problem))
			continue
		}
		jobs = append(jobs, loadJob{file: p, key: key, dir: dir, data: data})
	}
	return jobs, ds
}

// parse parses each job's file, or takes it from the loader's memory.
// Parsing is independent per file: it is spread over the cores.
func (l *Loader) parse(jobs []loadJob) []parsed {
	out := make([]parsed, len(jobs))
	var todo []int
	if l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	for i, j := range jobs {
		if l != nil {
			if p, ok := l.cache[cacheKey(j.file, j.data)]; ok {
				out[i] = p
				continue
			}
		}
		todo = append(todo, i)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(todo)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				if j.dir == factory.WebhooksDir {
					out[i].webhook, out[i].diags = schema.ParseWebhook(j.file, j.key, j.data)
				} else {
					out[i].automation, out[i].diags = schema.ParseAutomation(j.file, j.key, j.data)
				}
			}
		}()
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
	if l != nil {
		// Keep only this revision's files: memory stays the size of one
		// revision however many revisions pass.
		l.cache = make(map[string]parsed, len(jobs))
		for i, j := range jobs {
			l.cache[cacheKey(j.file, j.data)] = out[i]
		}
	}
	return out
}

// assemble adds the parsed definitions to d, marks files with errors
// broken, and checks that webhook names are unique ignoring case.
func (d *Desired) assemble(jobs []loadJob, results []parsed) schema.Diagnostics {
	var ds schema.Diagnostics
	names := map[string]string{} // case-folded display name → file
	for i, p := range results {
		ds = append(ds, p.diags...)
		if p.diags.HasErrors() {
			d.Broken[jobs[i].file] = true
		}
		if w := p.webhook; w != nil {
			folded := strings.ToLower(w.Name)
			if other, dup := names[folded]; dup {
				ds = append(ds, w.Doc.Diag(schema.Error, "/name", fmt.Sprintf("webhook name %q is already used by %s (names are compared ignoring case)", w.Name, other)))
			}
			names[folded] = jobs[i].file
			d.Webhooks = append(d.Webhooks, w)
		}
		if a := p.automation; a != nil {
			d.Automations = append(d.Automations, a)
		}
	}
	return ds
}

func fileError(file, msg string) schema.Diagnostic {
	return schema.Diagnostic{File: file, Line: 1, Column: 1, Message: msg, Severity: schema.Error}
}
