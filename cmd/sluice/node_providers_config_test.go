package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/push"
	"github.com/sluicehq/sluice/ratelimit"
)

// keyFiles writes an FCM service account file and an APNs .p8 key.
func keyFiles(t *testing.T) (fcmFile, apnsFile string) {
	t.Helper()
	dir := t.TempDir()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(rk)
	sa, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "shop", "client_email": "s@shop.iam.gserviceaccount.com",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": "https://oauth2.googleapis.com/token"})
	fcmFile = filepath.Join(dir, "fcm.json")
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	eder, _ := x509.MarshalPKCS8PrivateKey(ek)
	apnsFile = filepath.Join(dir, "AuthKey.p8")
	if os.WriteFile(fcmFile, sa, 0o600) != nil || os.WriteFile(apnsFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: eder}), 0o600) != nil {
		t.Fatal("write key files")
	}
	return fcmFile, apnsFile
}

func TestBuildProvidersFromConfig(t *testing.T) {
	t.Parallel()
	fcmFile, apnsFile := keyFiles(t)
	pc := config.Default().Notify.Providers
	pc.SMTP.Addr, pc.SMTP.From, pc.SMTP.Rate = "127.0.0.1:2525", "noreply@shop.test", 10
	pc.SMTPBackup.Addr = "127.0.0.1:2526"
	pc.Twilio.AccountSID, pc.Twilio.AuthToken, pc.Twilio.From = "AC1", "tok", "+1555"
	pc.TwilioBackup.AccountSID, pc.TwilioBackup.AuthToken, pc.TwilioBackup.From = "AC2", "tok2", "+1556"
	pc.FCM.CredentialsFile = fcmFile
	pc.APNs.KeyFile, pc.APNs.KeyID, pc.APNs.TeamID, pc.APNs.Topic = apnsFile, "KEY123", "TEAM42", "com.shop.app"
	ps, err := buildProviders(pc, ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.close()
	names := map[notify.Channel]string{}
	for ch, p := range ps.primary {
		names[ch] = p.Name()
	}
	if names[notify.Email] != "smtp" || names[notify.SMS] != "twilio" || names[notify.Push] != "push" || len(names) != 3 {
		t.Errorf("primaries = %v", names)
	}
	if len(ps.backups[notify.Email]) != 1 || ps.backups[notify.Email][0].Name() != "smtp-backup" ||
		len(ps.backups[notify.SMS]) != 1 || ps.backups[notify.SMS][0].Name() != "twilio-backup" {
		t.Errorf("backups = %v", ps.backups)
	}
	var cbs []string
	for name := range ps.callbacks {
		cbs = append(cbs, name)
	}
	slices.Sort(cbs)
	if strings.Join(cbs, ",") != "twilio,twilio-backup" {
		t.Errorf("callback providers = %v", cbs)
	}
	if len(ps.closers) != 2 {
		t.Errorf("%d closers, want the two SMTP clients'", len(ps.closers))
	}
	if len(ps.guards) != 6 || ps.guards[0].Pacer == nil || ps.guards[1].Pacer != nil {
		t.Errorf("%d guards; pacing only where a rate is set", len(ps.guards))
	}
	states, _ := json.Marshal(ps.breakerStates())
	if !strings.Contains(string(states), `"apns":"closed"`) {
		t.Errorf("breaker states = %s", states)
	}

	// The push router gets both guarded services; its routing rules are
	// tested in internal/notify/push.
	router, ok := ps.primary[notify.Push].(*push.Router)
	if !ok || router.FCM == nil || router.FCM.Name() != "fcm" || router.APNs == nil || router.APNs.Name() != "apns" {
		t.Errorf("push primary = %#v, want a router over fcm and apns", ps.primary[notify.Push])
	}
}
