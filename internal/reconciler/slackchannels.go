package reconciler

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"factory"
	"factory/internal/schema"
)

// ChannelLister lists the channels of a factory's Slack workspace that its
// bot token sees, ID by name (conversations.list); cred is factory.yaml's
// Slack credentials (the server config's go over them). nil, nil when the
// factory has no Slack token.
type ChannelLister func(ctx context.Context, factoryName string, cred factory.Credentials) (map[string]string, error)

// slackChannelID is the shape of a Slack channel ID (C0123456789; G and D
// for older private channels and direct messages).
var slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{6,}$`)

// resolveChannels turns the Slack channel names of the factory's triggers'
// channels filters into IDs (docs/spec/talkback.md), in copies of the
// desired automations (the loader keeps the files' own words), and drops
// the warning that channels match IDs where every name resolved; a name
// the workspace lacks is an error. Without a Slack token the names stay,
// warned of; when the API cannot be read, a warning says why.
func resolveChannels(ctx context.Context, d *Desired, ds schema.Diagnostics, name string, list ChannelLister) schema.Diagnostics {
	if list == nil || !slices.ContainsFunc(d.Automations, hasChannelNames) {
		return ds
	}
	var cred factory.Credentials
	if in := d.Settings.Integration(factory.IntegrationSlack); in != nil {
		cred = in.Credentials()
	}
	chans, err := list(ctx, name, cred)
	if chans == nil {
		if err != nil {
			for _, a := range d.Automations {
				if hasChannelNames(a) {
					ds = append(ds, a.Doc.Diag(schema.Warning, "", "Slack channel names are not resolved: "+err.Error()))
				}
			}
		}
		return ds
	}
	for k, a := range d.Automations {
		if !hasChannelNames(a) {
			continue
		}
		cp := *a
		cp.Triggers = slices.Clone(a.Triggers)
		for i := range cp.Triggers {
			t := &cp.Triggers[i]
			if t.Provider != factory.ProviderSlack || t.Filter.Keys["channels"].In == nil && t.Filter.Keys["channels"].NotIn == nil {
				continue
			}
			ptr := fmt.Sprintf("/triggers/%d/filter/channels", i)
			v := t.Filter.Keys["channels"]
			var missing []string
			v.In, missing = channelIDs(v.In, chans, missing)
			v.NotIn, missing = channelIDs(v.NotIn, chans, missing)
			t.Filter.Keys = maps.Clone(t.Filter.Keys)
			t.Filter.Keys["channels"] = v
			if len(missing) > 0 {
				ds = append(ds, a.Doc.Diag(schema.Error, ptr, fmt.Sprintf("no Slack channel the factory's bot sees is named %s (invite the bot, or list the channel's ID)",
					strings.Join(missing, ", "))))
			}
			ds = slices.DeleteFunc(ds, func(x schema.Diagnostic) bool {
				return x.Severity == schema.Warning && x.File == a.Doc.File && x.Path == ptr && strings.HasPrefix(x.Message, "channels are matched against channel IDs")
			})
		}
		d.Automations[k] = &cp
	}
	return ds
}

// channelIDs is vs with each channel name replaced by its ID; names not
// found are added to missing.
func channelIDs(vs []string, chans map[string]string, missing []string) ([]string, []string) {
	if vs == nil {
		return nil, missing
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if slackChannelID.MatchString(v) {
			out = append(out, v)
			continue
		}
		if id, ok := chans[strings.TrimPrefix(v, "#")]; ok {
			out = append(out, id)
		} else {
			missing = append(missing, "#"+strings.TrimPrefix(v, "#"))
		}
	}
	return out, missing
}

// hasChannelNames reports whether an automation's Slack triggers filter
// channels by a name rather than an ID.
func hasChannelNames(a *schema.Automation) bool {
	for _, t := range a.Triggers {
		if t.Provider != factory.ProviderSlack {
			continue
		}
		v := t.Filter.Keys["channels"]
		for _, c := range slices.Concat(v.In, v.NotIn) {
			if !slackChannelID.MatchString(c) {
				return true
			}
		}
	}
	return false
}
