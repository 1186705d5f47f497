package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/web"
)

// uiSecretName names the generated dashboard signing key in the database.
const uiSecretName = "ui_signing_key"

// uiOptions builds the dashboard's options: its files, and the key signing
// sessions and preference links (ui.secret, else one generated once and
// kept in the database so every node sharing it accepts the others'
// cookies and links).
func uiOptions(ctx context.Context, cfg config.Config, db *store.DB) (httpapi.UIOptions, error) {
	secret := cfg.UI.Secret
	if secret == "" {
		var err error
		if secret, err = serverSecret(ctx, db, uiSecretName); err != nil {
			return httpapi.UIOptions{}, fmt.Errorf("dashboard key: %w", err)
		}
	}
	return httpapi.UIOptions{
		Assets:        web.Files(),
		Secret:        []byte(secret),
		SessionTTL:    cfg.UI.SessionTTL,
		SecureCookies: cfg.UI.SecureCookies,
		PublicURL:     cfg.UIPublicURL(),
		PreferenceTTL: cfg.UI.PreferenceTTL,
	}, nil
}

// serverSecret returns the server secret name from the database, storing a
// fresh random one (32 bytes, base64url) first when there is none: every
// node sharing the database then uses the first one stored.
func serverSecret(ctx context.Context, db *store.DB, name string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("generate %s: %w", name, err)
	}
	return db.Secret(ctx, name, base64.RawURLEncoding.EncodeToString(raw[:]))
}
