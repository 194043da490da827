package reconciler

import (
	"fmt"
	"strings"

	"factory"
	"factory/internal/schema"
)

// extensionSchemes are the signature schemes this project accepts beyond
// the v1alpha1 format's.
var extensionSchemes = map[string]bool{"slack": true, "shopify": true, "linear": true, "gitlab": true, "standard-webhooks": true,
	"azure_devops": true}

// extensions lists each use of this project's extensions to the v1alpha1
// format (docs/definitions.md, "Extensions"), as errors: `reconcile
// --strict` reports them so that a team can check that its tree stays
// portable; without it they are valid and not reported.
func extensions(d *Desired) schema.Diagnostics {
	var ds schema.Diagnostics
	ext := func(doc *schema.Document, ptr, msg string) {
		if doc != nil {
			ds = append(ds, doc.Diag(schema.Error, ptr, "extension: "+msg))
		}
	}
	switch {
	case d.SettingsDoc == nil:
		ds = append(ds, fileError(factory.SettingsFile, "extension: a tree without factory.yaml (v1alpha1 requires it, with schemaVersion: v1alpha1)"))
	case !d.V1Alpha1():
		ext(d.SettingsDoc, "", "factory.yaml without schemaVersion: v1alpha1 (the flat layout)")
	}
	if d.Settings.WebhookBaseURL != "" {
		ext(d.SettingsDoc, "/webhookBaseUrl", "webhookBaseUrl (the product serves its own ingress URLs)")
	}
	if d.Settings.SpecApproval != "" {
		ext(d.SettingsDoc, "/specApproval", "specApproval (the product's spec approval is its own policy)")
	}
	if d.Settings.Orchestration != nil {
		ext(d.SettingsDoc, "/orchestration", "orchestration (the product bounds dispatches itself)")
	}
	mcpExtensions(d.SettingsDoc, "/mcpServers", string(d.Settings.MCPServers), ext)
	if len(d.Settings.Notifications) > 0 {
		ext(d.SettingsDoc, "/notifications", "notifications (run-status webhooks are this server's)")
	}
	for i, in := range d.Settings.IntegrationList() {
		for _, k := range credentialKeys(in.Credentials()) {
			ext(d.SettingsDoc, fmt.Sprintf("/integrations/%d/%s/%s", i, in.Type, k), k+" (the product keeps an integration's credentials itself)")
		}
	}
	budgetExtensions(d, ext)
	for _, a := range d.Automations {
		if !strings.HasSuffix(a.Doc.File, "/automation.md") {
			ext(a.Doc, "", fmt.Sprintf("a flat automation file; the v1alpha1 layout is automations/%s/automation.md", a.Key))
		}
		if a.Doc.Has("/title") {
			ext(a.Doc, "/title", "title (a v1alpha1 automation has none: its name is its folder's)")
		}
		if len(a.Config) > 0 {
			ext(a.Doc, "/config", "config (v1alpha1 sets execution with model, harness, runner and environmentId)")
		}
		for _, k := range []string{"writeBack", "continueWorkItem"} {
			if a.Doc.Has("/" + k) {
				ext(a.Doc, "/"+k, k+" (the product always writes back and continues a work item)")
			}
		}
	}
	for _, w := range d.Webhooks {
		if w.SecretName == "" {
			ext(w.Doc, "", "a webhook without secretName (a generated secret)")
		}
		if extensionSchemes[w.SignatureScheme] {
			ext(w.Doc, "/signatureScheme", fmt.Sprintf("signature scheme %s", w.SignatureScheme))
		}
		if w.EventSource != "" {
			ext(w.Doc, "/eventSource", "eventSource (v1alpha1 takes a webhook's provider from its signatureScheme)")
		}
	}
	return ds
}

// mcpExtensions reports MCP servers given as {command, ...} or {url, ...}
// rather than {warpId}.
func mcpExtensions(doc *schema.Document, ptr, servers string, ext func(*schema.Document, string, string)) {
	if strings.Contains(servers, `"command":`) || strings.Contains(servers, `"url":`) {
		ext(doc, ptr, "MCP servers by command or url (v1alpha1 names them by warpId)")
	}
}

// credentialKeys are the credential settings an integration entry gives
// (this project's extension), in the order the schema lists them.
func credentialKeys(c factory.Credentials) []string {
	var out []string
	for _, kv := range [][2]string{{"botTokenSecret", c.BotTokenSecret}, {"apiKeySecret", c.APIKeySecret}, {"baseURL", c.BaseURL},
		{"emailSecret", c.EmailSecret}, {"apiTokenSecret", c.APITokenSecret}, {"appId", c.AppID},
		{"appPasswordSecret", c.AppPasswordSecret}, {"tenantId", c.TenantID}} {
		if kv[1] != "" {
			out = append(out, kv[0])
		}
	}
	return out
}

// budgetExtensions reports each budget (agentDefaults', an agent's, an
// automation's): the product has none in the versioned definition.
func budgetExtensions(d *Desired, ext func(*schema.Document, string, string)) {
	const msg = "budget (the product bounds runs its own way)"
	if d.Settings.AgentDefaults != nil && d.Settings.AgentDefaults.Budget != nil {
		ext(d.SettingsDoc, "/agentDefaults/budget", msg)
	}
	for _, a := range d.Resources[factory.ResourceAgent] {
		if a.Doc.Has("/budget") {
			ext(a.Doc, "/budget", msg)
		}
	}
	for _, a := range d.Automations {
		if a.Exec != nil && a.Exec.Budget != nil {
			ext(a.Doc, "/budget", msg)
		}
	}
}
