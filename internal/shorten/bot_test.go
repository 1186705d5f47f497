package shorten

import "testing"

func TestClassifyHit(t *testing.T) {
	t.Parallel()
	const chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
	tests := []struct {
		name    string
		head    bool
		ua      string
		purpose string
		bot     bool
		reason  string
	}{
		{"browser", false, chrome, "", false, ""},
		{"iphone safari", false, "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "", false, ""},
		{"head from a browser", true, chrome, "", true, BotHead},
		{"prefetch", false, chrome, "prefetch;prerender", true, BotPrefetch},
		{"no user agent", false, "", "", true, BotNoAgent},
		{"slack", false, "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "", true, BotPreview},
		{"whatsapp", false, "WhatsApp/2.23.20.0 A", "", true, BotPreview},
		{"facebook", false, "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "", true, BotPreview},
		{"twitter", false, "Twitterbot/1.0", "", true, BotPreview},
		{"telegram", false, "TelegramBot (like TwitterBot)", "", true, BotPreview},
		{"discord", false, "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", "", true, BotPreview},
		{"imessage", false, "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0", "", true, BotPreview},
		{"google page renderer", false, "Mozilla/5.0 (compatible; Google-PageRenderer Google (+https://developers.google.com/+/web/snippet/))", "", true, BotPreview},
		{"googlebot", false, "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "", true, BotCrawler},
		{"proofpoint", false, "Mozilla/5.0 Proofpoint URL Defense", "", true, BotScanner},
		{"curl", false, "curl/8.5.0", "", true, BotTool},
		{"python", false, "python-requests/2.32", "", true, BotTool},
		{"generic bot", false, "SomethingBot/1.0", "", true, BotCrawler},
	}
	for _, tt := range tests {
		bot, reason := ClassifyHit(tt.head, tt.ua, tt.purpose)
		if bot != tt.bot || reason != tt.reason {
			t.Errorf("%s: ClassifyHit(%v, %q, %q) = %v, %q; want %v, %q", tt.name, tt.head, tt.ua, tt.purpose, bot, reason, tt.bot, tt.reason)
		}
	}
}
