package config

import (
	"reflect"
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
		{"smtp, empty", SMTPBackup{Addr: "b:25"}.Inherit(smtp),
			SMTP{Addr: "b:25", TLS: "tls", Auth: "login", From: "a@x", FromName: "A", LocalName: "h", UnsubscribeURL: "https://u"}},
		{"smtp, full", SMTPBackup{Addr: "b:25", Username: "v", Password: "q", From: "b@x", Rate: 2}.Inherit(smtp),
			SMTP{Addr: "b:25", TLS: "tls", Username: "v", Password: "q", Auth: "login", From: "b@x", FromName: "A", LocalName: "h",
				UnsubscribeURL: "https://u", Rate: 2}},
		{"twilio", TwilioBackup{AccountSID: "AC2"}.Inherit(twilio), Twilio{AccountSID: "AC2"}},
		{"fcm, empty", FCMBackup{CredentialsFile: "g.json"}.Inherit(fcm), FCM{CredentialsFile: "g.json", BaseURL: "https://f"}},
		{"fcm, full", FCMBackup{CredentialsFile: "g.json", ProjectID: "q", BaseURL: "https://g", TokenURL: "https://t2", Rate: 2}.Inherit(fcm),
			FCM{CredentialsFile: "g.json", ProjectID: "q", BaseURL: "https://g", TokenURL: "https://t2", Rate: 2}},
		{"apns, empty", APNsBackup{KeyFile: "l.p8"}.Inherit(apns), APNs{KeyFile: "l.p8", Topic: "app", BaseURL: "https://a"}},
		{"apns, full", APNsBackup{KeyFile: "l.p8", KeyID: "L", TeamID: "U", Topic: "app2", BaseURL: "https://b", Rate: 2}.Inherit(apns),
			APNs{KeyFile: "l.p8", KeyID: "L", TeamID: "U", Topic: "app2", BaseURL: "https://b", Rate: 2}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: Inherit = %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}
