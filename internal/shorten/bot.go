package shorten

import "strings"

// Bot reasons recorded with a hit that is not counted as a human click.
const (
	BotHead     = "head"          // a HEAD request: nobody follows a link with HEAD
	BotNoAgent  = "no_user_agent" // no User-Agent header at all
	BotPreview  = "preview"       // a link-preview fetcher (chat apps, social networks)
	BotScanner  = "scanner"       // a security or mail link scanner
	BotCrawler  = "crawler"       // a search or archive crawler
	BotTool     = "tool"          // an HTTP library or command-line tool
	BotPrefetch = "prefetch"      // a browser prefetch or prerender
)

// botPatterns are matched, lower-cased, against the User-Agent; the first
// match wins, so specific fetchers come before generic words.
var botPatterns = []struct{ substr, reason string }{
	// Link previews: chat and social apps fetching the page to draw a card.
	{"slackbot", BotPreview}, {"slack-imgproxy", BotPreview}, {"whatsapp", BotPreview},
	{"facebookexternalhit", BotPreview}, {"facebookcatalog", BotPreview}, {"meta-externalagent", BotPreview},
	{"twitterbot", BotPreview}, {"telegrambot", BotPreview}, {"discordbot", BotPreview},
	{"linkedinbot", BotPreview}, {"skypeuripreview", BotPreview}, {"pinterestbot", BotPreview},
	{"redditbot", BotPreview}, {"embedly", BotPreview}, {"vkshare", BotPreview},
	{"mattermost", BotPreview},
	{"google-pagerenderer", BotPreview}, {"googledocs", BotPreview}, {"microsoftpreview", BotPreview},
	{"iframely", BotPreview}, {"outbrain", BotPreview}, {"qwantify", BotPreview},
	// Apple's iMessage preview fetcher announces itself as Facebook's and
	// Twitter's bots together; it is caught by the patterns above.
	// Scanners: mail gateways and security products opening every link.
	{"proofpoint", BotScanner}, {"mimecast", BotScanner}, {"barracuda", BotScanner},
	{"safelinks", BotScanner}, {"urlscan", BotScanner}, {"virustotal", BotScanner},
	{"zscaler", BotScanner}, {"forcepoint", BotScanner}, {"symantec", BotScanner},
	{"trendmicro", BotScanner}, {"fortiguard", BotScanner}, {"paloalto", BotScanner},
	{"censys", BotScanner}, {"nmap", BotScanner}, {"masscan", BotScanner}, {"zgrab", BotScanner},
	{"nuclei", BotScanner}, {"expanse", BotScanner}, {"netcraft", BotScanner},
	// Crawlers.
	{"googlebot", BotCrawler}, {"google-inspectiontool", BotCrawler}, {"adsbot-google", BotCrawler},
	{"bingbot", BotCrawler}, {"bingpreview", BotPreview}, {"yandex", BotCrawler}, {"baiduspider", BotCrawler},
	{"duckduckbot", BotCrawler}, {"applebot", BotCrawler}, {"petalbot", BotCrawler}, {"semrush", BotCrawler},
	{"ahrefs", BotCrawler}, {"mj12bot", BotCrawler}, {"dotbot", BotCrawler}, {"ia_archiver", BotCrawler},
	{"archive.org_bot", BotCrawler}, {"gptbot", BotCrawler}, {"chatgpt-user", BotPreview},
	{"claudebot", BotCrawler}, {"ccbot", BotCrawler}, {"bytespider", BotCrawler}, {"amazonbot", BotCrawler},
	{"headlesschrome", BotCrawler}, {"phantomjs", BotCrawler}, {"lighthouse", BotCrawler},
	// Tools and libraries.
	{"curl/", BotTool}, {"wget/", BotTool}, {"python-requests", BotTool}, {"python-urllib", BotTool},
	{"aiohttp", BotTool}, {"httpx", BotTool}, {"go-http-client", BotTool}, {"okhttp", BotTool},
	{"java/", BotTool}, {"apache-httpclient", BotTool}, {"libwww-perl", BotTool}, {"node-fetch", BotTool},
	{"axios/", BotTool}, {"undici", BotTool}, {"postmanruntime", BotTool}, {"insomnia", BotTool},
	{"httpie", BotTool}, {"wrk", BotTool}, {"apachebench", BotTool}, {"k6/", BotTool},
	// Generic words last.
	{"bot", BotCrawler}, {"crawler", BotCrawler}, {"spider", BotCrawler}, {"scraper", BotCrawler},
	{"preview", BotPreview}, {"fetcher", BotCrawler}, {"scan", BotScanner}, {"monitor", BotTool},
	{"checker", BotTool}, {"validator", BotTool},
}

// ClassifyHit decides whether a hit on a link came from a bot, and why.
// head is whether the request was HEAD; purpose is the Sec-Purpose or
// Purpose header (browsers send "prefetch" when loading ahead of a click).
// The empty reason means a human click.
func ClassifyHit(head bool, userAgent, purpose string) (bot bool, reason string) {
	if head {
		return true, BotHead
	}
	if purpose != "" && strings.Contains(strings.ToLower(purpose), "prefetch") {
		return true, BotPrefetch
	}
	ua := strings.TrimSpace(userAgent)
	if ua == "" {
		return true, BotNoAgent
	}
	ua = strings.ToLower(ua)
	for _, p := range botPatterns {
		if strings.Contains(ua, p.substr) {
			return true, p.reason
		}
	}
	return false, ""
}
