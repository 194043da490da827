package reconciler

import (
	"fmt"
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
	SettingsDoc *schema.Document     // nil without factory.yaml
	Webhooks    []*schema.Webhook    // by key
	Automations []*schema.Automation // by key
	// Resources are the agents, runners, skills, scorers and benchmark
	// suites, by kind (factory.Resource*), each in key order. A suite's
	// tasks are in Tasks, a skill's other files in SkillFiles.
	Resources  map[string][]*schema.Resource
	Tasks      map[string][]*schema.Resource // suite → its tasks, by name
	SkillFiles map[string]map[string][]byte  // skill key → path in its folder → bytes
	// Broken holds the paths of definition files that have errors. They
	// are neither applied nor deleted: a plan of a revision with broken
	// files still checks the other files, but is not applied. BrokenNames
	// holds the same as kind/name, for definitions no longer at one path.
	Broken      map[string]bool
	BrokenNames map[string]bool
}

// V1Alpha1 reports whether the revision declares the v1alpha1 format.
func (d *Desired) V1Alpha1() bool { return d.Settings.SchemaVersion != "" }

// Resource finds a resource of the revision by kind and key.
func (d *Desired) Resource(kind, key string) *schema.Resource {
	for _, r := range d.Resources[kind] {
		if r.Key == key {
			return r
		}
	}
	return nil
}

var (
	namePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	resourcePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// ValidName reports whether s can name a factory, a webhook or an automation.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// ValidResourceName reports whether s can name an agent, a runner, a
// scorer, a suite, a task or a skill: the v1alpha1 names are wider.
func ValidResourceName(s string) bool { return resourcePattern.MatchString(s) }

// Load parses and validates every file of a snapshot and reports every
// problem of every file, sorted by file and position. Desired holds the
// files that are valid; with any error the revision must not be applied.
func Load(snap *Snapshot) (*Desired, schema.Diagnostics) { return (*Loader)(nil).Load(snap) }

// Loader is Load with a memory of parsed files: a file whose path and
// content are unchanged since the last load is not parsed again, so a
// commit that changes one file of a thousand parses one. The zero value is
// ready; a nil *Loader keeps no memory.
type Loader struct {
	// Schedules bound the revision's schedules (a server's configuration);
	// zero fields take the defaults.
	Schedules factory.ScheduleLimits

	mu    sync.Mutex
	cache map[string]parsed
}

// limits are the loader's schedule limits; a nil loader's are the defaults.
func (l *Loader) limits() factory.ScheduleLimits {
	if l == nil {
		return factory.ScheduleLimits{}.OrDefaults()
	}
	return l.Schedules.OrDefaults()
}

type parsed struct {
	webhook    *schema.Webhook
	automation *schema.Automation
	resource   *schema.Resource
	diags      schema.Diagnostics
}

func cacheKey(file string, data []byte) string { return file + "\x00" + string(data) }

// Load is the package's Load, using and refreshing the loader's memory.
// Its steps: sort the snapshot's files into definitions (checking names
// and counts), parse each (in parallel, or from memory), assemble the
// revision, then check what spans files (references, foremen, suites).
func (l *Loader) Load(snap *Snapshot) (*Desired, schema.Diagnostics) {
	return l.load(snap, l.limits())
}

func (l *Loader) load(snap *Snapshot, lim factory.ScheduleLimits) (*Desired, schema.Diagnostics) {
	ds := append(schema.Diagnostics{}, snap.Diagnostics...)
	d := &Desired{Revision: snap.Revision, Broken: map[string]bool{}, BrokenNames: map[string]bool{},
		Resources: map[string][]*schema.Resource{}, Tasks: map[string][]*schema.Resource{}, SkillFiles: map[string]map[string][]byte{}}
	for _, sd := range snap.Diagnostics {
		d.markBroken(sd.File)
	}
	ds = append(ds, otherDirs(snap.OtherDirs)...)
	jobs, fds := d.definitions(snap)
	ds = append(ds, fds...)
	results := l.parse(jobs)
	ds = append(ds, d.assemble(jobs, results)...)
	ds = append(ds, d.crossFile(lim)...)
	ds.Sort()
	return d, ds
}

// markBroken marks a file broken, and the definition it belongs to.
func (d *Desired) markBroken(file string) {
	d.Broken[file] = true
	if dp, ok, err := factory.ParsePath(file); ok && err == nil {
		d.BrokenNames[brokenName(dp)] = true
	}
}

func brokenName(dp factory.DefinitionPath) string {
	switch dp.Kind {
	case factory.FileSkill, factory.FileSkillAsset:
		return factory.ResourceSkill + "/" + dp.SkillKey()
	case factory.FileTask:
		return factory.ResourceSuite + "/" + dp.Owner
	}
	return dp.Kind + "/" + dp.Name
}

// otherDirs judges the top-level folders that are not the format's: a
// near miss of a known one is an error (its files would be ignored), any
// other a warning.
func otherDirs(dirs []string) schema.Diagnostics {
	var ds schema.Diagnostics
	for _, dir := range dirs {
		if near := nearest(dir, factory.KnownDirs); near != "" {
			ds = append(ds, fileError(dir+"/", fmt.Sprintf("unknown folder %s/: did you mean %s/? (nothing in it is read)", dir, near)))
			continue
		}
		ds = append(ds, schema.Diagnostic{File: dir + "/", Line: 1, Column: 1, Severity: schema.Warning,
			Message: fmt.Sprintf("folder %s/ is not part of a factory definition (%s/): ignored", dir, strings.Join(factory.KnownDirs, "/, "))})
	}
	return ds
}

// nearest is the candidate schema.DidYouMean would suggest, or "".
func nearest(got string, candidates []string) string {
	hint := schema.DidYouMean(got, candidates)
	if hint == "" {
		return ""
	}
	_, q, _ := strings.Cut(hint, "\"")
	name, _, _ := strings.Cut(q, "\"")
	return name
}

// loadJob is one definition file to parse.
type loadJob struct {
	file string
	path factory.DefinitionPath
	data []byte
}

// definitions reads factory.yaml into d and lists the definition files to
// parse, in path order. A file with a wrong name or place, or a webhook
// over the limit, is broken and reported.
func (d *Desired) definitions(snap *Snapshot) ([]loadJob, schema.Diagnostics) {
	var ds schema.Diagnostics
	var jobs []loadJob
	paths := make([]string, 0, len(snap.Files))
	for p := range snap.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	webhookFiles := 0
	automations := map[string]string{} // name → file
	for _, p := range paths {
		data := snap.Files[p]
		dp, ok, err := factory.ParsePath(p)
		if !ok {
			continue
		}
		if dp.Kind == factory.FileSettings {
			f, doc, fds := schema.ParseFactoryDocument(p, data)
			ds = append(ds, fds...)
			if f != nil {
				d.Settings, d.SettingsDoc = *f, doc
			}
			continue
		}
		problem := ""
		if err != nil {
			problem = err.Error()
		} else {
			problem = d.nameProblem(dp, &webhookFiles)
		}
		if problem == "" && dp.Kind == factory.FileAutomation {
			if other, dup := automations[dp.Name]; dup {
				problem = fmt.Sprintf("automation %q is defined twice: here and in %s (keep one)", dp.Name, other)
				d.markBroken(other)
				ds = append(ds, fileError(other, fmt.Sprintf("automation %q is defined twice: here and in %s (keep one)", dp.Name, p)))
			}
			automations[dp.Name] = p
		}
		if problem != "" {
			d.markBroken(p)
			ds = append(ds, fileError(p, problem))
			continue
		}
		if dp.Kind == factory.FileSkillAsset {
			if d.SkillFiles[dp.SkillKey()] == nil {
				d.SkillFiles[dp.SkillKey()] = map[string][]byte{}
			}
			d.SkillFiles[dp.SkillKey()][dp.Asset] = data
			continue
		}
		jobs = append(jobs, loadJob{file: p, path: dp, data: data})
	}
	return jobs, ds
}

// nameProblem checks a definition's name: webhooks and automations keep
// the flat layout's stricter names (they appear in URLs and run IDs).
func (d *Desired) nameProblem(dp factory.DefinitionPath, webhookFiles *int) string {
	switch dp.Kind {
	case factory.FileWebhook, factory.FileAutomation:
		if !ValidName(dp.Name) {
			return fmt.Sprintf("file name %q must match %s: lowercase letters, digits and '-', at most 63", dp.Name, namePattern)
		}
		if dp.Kind == factory.FileWebhook {
			if *webhookFiles++; *webhookFiles > factory.MaxWebhooksPerFactory {
				return fmt.Sprintf("too many webhooks: a factory has at most %d (this is webhook %d)", factory.MaxWebhooksPerFactory, *webhookFiles)
			}
		}
		return ""
	}
	for _, n := range []string{dp.Name, dp.Owner} {
		if n != "" && !ValidResourceName(n) {
			return fmt.Sprintf("name %q must match %s: letters, digits, '.', '_' and '-', at most 63", n, resourcePattern)
		}
	}
	return ""
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
				out[i] = parseFile(jobs[i])
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

// parseFile parses one definition file by its kind.
func parseFile(j loadJob) parsed {
	var p parsed
	name := j.path.Name
	switch j.path.Kind {
	case factory.FileWebhook:
		p.webhook, p.diags = schema.ParseWebhook(j.file, name, j.data)
	case factory.FileAutomation:
		p.automation, p.diags = schema.ParseAutomation(j.file, name, j.data)
	case factory.FileAgent:
		p.resource, p.diags = schema.ParseResource(schema.KindAgent, j.file, name, j.data, true, false)
	case factory.FileRunner:
		p.resource, p.diags = schema.ParseResource(schema.KindRunner, j.file, name, j.data, false, false)
	case factory.FileScorer:
		p.resource, p.diags = schema.ParseResource(schema.KindScorer, j.file, name, j.data, true, true)
	case factory.FileSuite:
		p.resource, p.diags = schema.ParseResource(schema.KindSuite, j.file, name, j.data, false, false)
	case factory.FileTask:
		p.resource, p.diags = schema.ParseResource(schema.KindTask, j.file, name, j.data, false, false)
	case factory.FileSkill:
		p.resource, p.diags = schema.ParseSkill(j.file, j.path.SkillKey(), j.data)
	}
	return p
}

// resourceKind is the applied kind of a file kind.
var resourceKind = map[string]string{
	factory.FileAgent: factory.ResourceAgent, factory.FileRunner: factory.ResourceRunner,
	factory.FileScorer: factory.ResourceScorer, factory.FileSuite: factory.ResourceSuite, factory.FileSkill: factory.ResourceSkill,
}

// assemble adds the parsed definitions to d, marks files with errors
// broken, and checks that webhook names are unique ignoring case.
func (d *Desired) assemble(jobs []loadJob, results []parsed) schema.Diagnostics {
	var ds schema.Diagnostics
	names := map[string]string{} // case-folded display name → file
	for i, p := range results {
		ds = append(ds, p.diags...)
		if p.diags.HasErrors() {
			d.markBroken(jobs[i].file)
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
		if r := p.resource; r != nil {
			if jobs[i].path.Kind == factory.FileTask {
				d.Tasks[jobs[i].path.Owner] = append(d.Tasks[jobs[i].path.Owner], r)
				continue
			}
			kind := resourceKind[jobs[i].path.Kind]
			d.Resources[kind] = append(d.Resources[kind], r)
		}
	}
	// Nested and flat automations sort apart by path: keep them by name.
	sort.SliceStable(d.Automations, func(i, j int) bool { return d.Automations[i].Key < d.Automations[j].Key })
	return ds
}

func fileError(file, msg string) schema.Diagnostic {
	return schema.Diagnostic{File: file, Line: 1, Column: 1, Message: msg, Severity: schema.Error}
}
