package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"factory"

	"factory/internal/cursor"
	"factory/internal/store"
)

// downloadURLLifetime is how long an artifact's download URL works
// without an API key.
const downloadURLLifetime = 15 * time.Minute

// artifactOf reads an artifact with stored bytes.
func (s *Server) artifactOf(uid string) (factory.Artifact, error) {
	_, a, err := s.store.Artifact(uid)
	if errors.Is(err, store.ErrNotFound) {
		return a, errorf(CodeNotFound, fmt.Sprintf("no artifact %s", uid))
	}
	return a, err
}

// getArtifact is GET /v1/agent/artifacts/{uid}: the artifact, with a
// download URL that works without an API key for a while (a plan's
// content inline, as the SDKs read it).
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) error {
	uid := r.PathValue("uid")
	a, err := s.artifactOf(uid)
	if err != nil {
		return err
	}
	d := a.Data
	data := map[string]any{"content_type": d.MimeType}
	switch a.Type {
	case factory.ArtifactPlan:
		content, err := s.store.ArtifactBytes(uid)
		if err != nil {
			return err
		}
		data["content"], data["document_uid"], data["notebook_uid"] = string(content), d.DocumentUID, d.DocumentUID
		if d.Title != "" {
			data["title"] = d.Title
		}
	default:
		u, expires, err := s.artifactDownloadURL(r, uid)
		if err != nil {
			return err
		}
		data["download_url"], data["expires_at"] = u, expires
		for k, v := range map[string]string{"description": d.Description, "title": d.Title} {
			if v != "" {
				data[k] = v
			}
		}
		if a.Type == factory.ArtifactFile {
			data["filename"], data["filepath"], data["size_bytes"] = d.Filename, d.Filepath, d.SizeBytes
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"artifact_type": a.Type, "artifact_uid": uid, "created_at": a.CreatedAt, "data": data})
	return nil
}

// artifactDownloadURL is a URL that downloads an artifact's bytes without
// an API key until it expires.
func (s *Server) artifactDownloadURL(r *http.Request, uid string) (string, time.Time, error) {
	key, err := s.cursorKey()
	if err != nil {
		return "", time.Time{}, err
	}
	expires := time.Now().Add(downloadURLLifetime).UTC().Truncate(time.Second)
	token := cursor.Seal(key, "artifact-download:"+uid, strconv.FormatInt(expires.Unix(), 10))
	return s.baseURL(r) + "/v1/agent/artifacts/" + url.PathEscape(uid) + "/download?token=" + url.QueryEscape(token), expires, nil
}

// baseURL is where clients reach this server: the configured public URL,
// else the address the request came to.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	return "http://" + r.Host
}

// downloadArtifact is GET /v1/agent/artifacts/{uid}/download: the bytes,
// to a request with a download URL's token that has not expired, or with
// an API key that may read runs.
func (s *Server) downloadArtifact() http.Handler {
	withKey := s.auth(s.needRuns(s.sendArtifact), factory.ScopeRuns, factory.ScopeRead)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := r.URL.Query().Get("token")
		if token == "" {
			withKey.ServeHTTP(w, r)
			return
		}
		if err := s.checkDownloadToken(r.PathValue("uid"), token); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.sendArtifact(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// checkDownloadToken accepts a token this server made for this artifact,
// until it expires.
func (s *Server) checkDownloadToken(uid, token string) error {
	key, err := s.cursorKey()
	if err != nil {
		return err
	}
	v, err := cursor.Open(key, "artifact-download:"+uid, token)
	if err != nil {
		return errorf(CodeNotAuthorized, "token: not a download token of this artifact")
	}
	exp, _ := strconv.ParseInt(v, 10, 64)
	if time.Now().Unix() > exp {
		return errorf(CodeNotAuthorized, "token: this download URL has expired; get the artifact again for a new one")
	}
	return nil
}

func (s *Server) sendArtifact(w http.ResponseWriter, r *http.Request) error {
	uid := r.PathValue("uid")
	a, err := s.artifactOf(uid)
	if err != nil {
		return err
	}
	b, err := s.store.ArtifactBytes(uid)
	if err != nil {
		return err
	}
	mt := a.Data.MimeType
	name := a.Data.Filename
	if name == "" {
		name = uid
	}
	sendUntrusted(w, mt, name, b)
	return nil
}

// sendUntrusted sends bytes an agent or a caller gave (artifacts,
// attachments) as a download: a browser holding a dashboard session must
// not run them as this server's page, whatever type they claim.
func sendUntrusted(w http.ResponseWriter, mimeType, name string, b []byte) {
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	w.Header().Set("Content-Type", mimeType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Content-Security-Policy", "sandbox")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	w.Write(b)
}

// runByExternalReference is GET /v1/agent/run-by-external-reference?url=:
// the run that reported that pull request or reference last.
func (s *Server) runByExternalReference(w http.ResponseWriter, r *http.Request) error {
	u := r.URL.Query().Get("url")
	if u == "" {
		return errorf(CodeInvalidRequest, "url: required (the pull request's or reference's URL)")
	}
	id, err := s.store.RunByExternalReference(u)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeNotFound, "no run reported "+u)
	}
	if err != nil {
		return err
	}
	run, err := s.store.Run(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run.Item())
	return nil
}
