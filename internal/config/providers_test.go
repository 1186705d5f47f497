package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestBackupsInherit pins what each backup provider takes from its
// primary: SMTP its TLS, auth mechanism, names and (when it names none)
// sender; FCM its API root; APNs its topic and API root; Twilio nothing.
func TestBackupsInherit(t *testing.T) {
	t.Parallel()
	smtp := SMTP{Addr: "a:25", TLS: "tls", Username: "u", Password: "p", Auth: "login", From: "a@x", FromName: "A",
		LocalName: "h", UnsubscribeURL: "https://u", Rate: 1}
	twilio := Twilio{BaseURL: "https://t", AccountSID: "AC1", AuthToken: "k", From: "+1", MessagingServiceSID: "MG1", Rate: 1}
	fcm := FCM{CredentialsFile: "f.json", ProjectID: "p", BaseURL: "https://f", TokenURL: "https://tok", Rate: 1}
	apns := APNs{KeyFile: "k.p8", KeyID: "K", TeamID: "T", Topic: "app", BaseURL: "https://a", Rate: 1}
	tests := []struct {
		name      string
		got, want any
	}{
		{"smtp, empty", Inherit(SMTP{Addr: "b:25"}, smtp),
			SMTP{Addr: "b:25", TLS: "tls", Auth: "login", From: "a@x", FromName: "A", LocalName: "h", UnsubscribeURL: "https://u"}},
		{"smtp, full", Inherit(SMTP{Addr: "b:25", Username: "v", Password: "q", From: "b@x", Rate: 2}, smtp),
			SMTP{Addr: "b:25", TLS: "tls", Username: "v", Password: "q", Auth: "login", From: "b@x", FromName: "A", LocalName: "h",
				UnsubscribeURL: "https://u", Rate: 2}},
		{"smtp, its own names", Inherit(SMTP{Addr: "b:465", TLS: "none", Auth: "plain", From: "b@x", FromName: "B", LocalName: "i",
			UnsubscribeURL: "https://v"}, smtp),
			SMTP{Addr: "b:465", TLS: "none", Auth: "plain", From: "b@x", FromName: "B", LocalName: "i", UnsubscribeURL: "https://v"}},
		{"twilio", Inherit(Twilio{AccountSID: "AC2"}, twilio), Twilio{AccountSID: "AC2"}},
		{"twilio, messaging service", Inherit(Twilio{AccountSID: "AC2", AuthToken: "l", MessagingServiceSID: "MG2"}, twilio),
			Twilio{AccountSID: "AC2", AuthToken: "l", MessagingServiceSID: "MG2"}},
		{"fcm, empty", Inherit(FCM{CredentialsFile: "g.json"}, fcm), FCM{CredentialsFile: "g.json", BaseURL: "https://f"}},
		{"fcm, full", Inherit(FCM{CredentialsFile: "g.json", ProjectID: "q", BaseURL: "https://g", TokenURL: "https://t2", Rate: 2}, fcm),
			FCM{CredentialsFile: "g.json", ProjectID: "q", BaseURL: "https://g", TokenURL: "https://t2", Rate: 2}},
		{"apns, empty", Inherit(APNs{KeyFile: "l.p8"}, apns), APNs{KeyFile: "l.p8", Topic: "app", BaseURL: "https://a"}},
		{"apns, full", Inherit(APNs{KeyFile: "l.p8", KeyID: "L", TeamID: "U", Topic: "app2", BaseURL: "https://b", Rate: 2}, apns),
			APNs{KeyFile: "l.p8", KeyID: "L", TeamID: "U", Topic: "app2", BaseURL: "https://b", Rate: 2}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: Inherit() = %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

// TestBackupSettingsKeepTheirNames pins the backups' flags, environment
// variables and YAML keys that deployments already use, and the ones their
// primary's type adds (inherited or not).
func TestBackupSettingsKeepTheirNames(t *testing.T) {
	t.Parallel()
	want := map[string]string{ // flag: YAML key
		"smtp-backup-addr": "smtp_backup.addr", "smtp-backup-username": "smtp_backup.username",
		"smtp-backup-password": "smtp_backup.password", "smtp-backup-from": "smtp_backup.from", "smtp-backup-rate": "smtp_backup.rate",
		"twilio-backup-base-url": "twilio_backup.base_url", "twilio-backup-account-sid": "twilio_backup.account_sid",
		"twilio-backup-auth-token": "twilio_backup.auth_token", "twilio-backup-from": "twilio_backup.from",
		"twilio-backup-rate": "twilio_backup.rate", "fcm-backup-rate": "fcm_backup.rate", "apns-backup-rate": "apns_backup.rate",
		"fcm-backup-credentials-file": "fcm_backup.credentials_file", "fcm-backup-project-id": "fcm_backup.project_id",
		"fcm-backup-base-url": "fcm_backup.base_url", "fcm-backup-token-url": "fcm_backup.token_url",
		"apns-backup-key-file": "apns_backup.key_file", "apns-backup-key-id": "apns_backup.key_id", "apns-backup-team-id": "apns_backup.team_id",
		"apns-backup-topic": "apns_backup.topic", "apns-backup-base-url": "apns_backup.base_url",
		// added with the primary's type
		"smtp-backup-tls": "smtp_backup.tls", "smtp-backup-auth": "smtp_backup.auth", "smtp-backup-from-name": "smtp_backup.from_name",
		"smtp-backup-local-name": "smtp_backup.local_name", "smtp-backup-unsubscribe-url": "smtp_backup.unsubscribe_url",
		"twilio-backup-messaging-service-sid": "twilio_backup.messaging_service_sid",
	}
	got := map[string]Field{}
	for _, f := range Fields() {
		if strings.Contains(f.Flag, "-backup-") {
			got[f.Flag] = f
		}
	}
	for fl, key := range want {
		f, ok := got[fl]
		env := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(fl, "-", "_"))
		switch {
		case !ok:
			t.Errorf("no setting --%s", fl)
		case f.YAML != "notify.providers."+key || f.Env != env:
			t.Errorf("--%s: YAML %s, env %s; want notify.providers.%s, %s", fl, f.YAML, f.Env, key, env)
		case !strings.HasPrefix(f.Usage, "backup"):
			t.Errorf("--%s: usage %q does not say it is the backup's", fl, f.Usage)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d backup settings, want %d", len(got), len(want))
	}
}

// TestBackupSettingsLoad reads a backup's settings from each source and
// fills the rest from its primary.
func TestBackupSettingsLoad(t *testing.T) {
	t.Parallel()
	file := yamlFile(t, "notify:\n  providers:\n    smtp_backup:\n      tls: tls\n      local_name: b.example\n")
	cfg, err := load(t, []string{"--smtp-addr", "a:25", "--smtp-from", "a@x", "--smtp-local-name", "a.example", "--smtp-backup-addr", "b:465",
		"--config", file}, map[string]string{"SLUICE_SMTP_BACKUP_FROM": "b@x"})
	if err != nil {
		t.Fatal(err)
	}
	pc := cfg.Notify.Providers
	got := Inherit(pc.SMTPBackup, pc.SMTP)
	want := SMTP{Addr: "b:465", TLS: "tls", From: "b@x", LocalName: "b.example"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Inherit(SMTPBackup, SMTP) = %+v, want %+v", got, want)
	}
	if pc.SMTP.TLS != "starttls" || pc.SMTP.LocalName != "a.example" {
		t.Errorf("SMTP = %+v: the backup's settings reached the primary", pc.SMTP)
	}
}

// TestTwilioBackupSender holds the backup account to what the primary
// needs: a from number or a messaging service of its own.
func TestTwilioBackupSender(t *testing.T) {
	t.Parallel()
	primary := []string{"--twilio-account-sid", "AC1", "--twilio-auth-token", "k", "--twilio-from", "+1555"}
	backup := []string{"--twilio-backup-account-sid", "AC2", "--twilio-backup-auth-token", "l"}
	tests := []struct {
		name  string
		extra []string
		ok    bool
	}{
		{"from number", []string{"--twilio-backup-from", "+1556"}, true},
		{"messaging service", []string{"--twilio-backup-messaging-service-sid", "MG2"}, true},
		{"neither", nil, false},
	}
	for _, tt := range tests {
		_, err := load(t, append(append(append([]string(nil), primary...), backup...), tt.extra...), nil)
		if tt.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "twilio-backup-auth-token")) {
			t.Errorf("%s: Load() error = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
