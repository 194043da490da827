package foreman

import (
	"cmp"
	"slices"
	"strings"

	"factory"
)

// Board is a factory's live tasks by stage, as a board shows them: each
// stage's newest-updated first, at most perStage of each, with their
// tickets and (q.CurrentRun) current runs; more says which stages hold
// others. The query's filters apply but its stages, sort and paging do
// not. One read of the factory's tasks serves every stage.
func (f *Foreman) Board(fac *factory.Factory, q TaskQuery, perStage int) (map[factory.TaskStage][]factory.TaskItem, map[factory.TaskStage]bool, error) {
	all, err := f.cfg.Store.Tasks(fac.UID)
	if err != nil {
		return nil, nil, err
	}
	q.Stages = nil
	all = slices.DeleteFunc(all, func(t *factory.Task) bool { return !q.keeps(t) })
	slices.SortFunc(all, func(a, b *factory.Task) int {
		return -cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), strings.Compare(a.UID, b.UID))
	})
	cols, more := map[factory.TaskStage][]factory.TaskItem{}, map[factory.TaskStage]bool{}
	for _, t := range all {
		if len(cols[t.Stage]) >= perStage {
			more[t.Stage] = true
			continue
		}
		cols[t.Stage] = append(cols[t.Stage], f.View(t, q.CurrentRun, false, true))
	}
	return cols, more, nil
}
