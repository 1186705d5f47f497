package topology

import "time"

// Bounds are the documented allowances the checkers hold a history to.
type Bounds struct {
	// FaultGrace widens every fault on each side: effects outlast it (a
	// node restarting, a replica promoted, consumers moving).
	FaultGrace time.Duration
	// InFlight bounds the duplicate deliveries a fault may cause: the jobs
	// that were being sent when it struck (workers x nodes).
	InFlight int
	// ClickLoss bounds the clicks a killed node may lose: its unflushed
	// click buffer.
	ClickLoss int64
	// OTPp99 and OTPMax bound, in every row, the 99th percentile and the
	// slowest of the OTPs' accept-to-delivery times (see check_notify.go);
	// zero leaves that one unchecked. The harness holds a run to
	// OTPBoundP99 and OTPBoundMax.
	OTPp99, OTPMax time.Duration
}

// The OTP latency promise (docs/reliability.md): an OTP is delivered
// within 5 s, also while one node or one server of a clustered engine is
// lost, and none takes more than 10 s.
const (
	OTPBoundP99 = 5 * time.Second
	OTPBoundMax = 10 * time.Second
)

// Row is what clients saw during one fault (or "none", outside every
// fault), as docs/reliability.md tabulates it.
type Row struct {
	Fault string `json:"fault"`
	// Availability: operations, those that failed (5xx or no answer), and
	// the longest run of consecutive failures in start order.
	Requests      int           `json:"requests"`
	Errors        int           `json:"errors"`
	LongestStreak int           `json:"longest_error_streak"`
	StreakTime    time.Duration `json:"longest_error_streak_ns"`
	// RequestsByKind and ErrorsByKind split Requests and Errors by kind of
	// client operation (check, notify, redirect, create); a kind without
	// requests (or errors) is absent, and so is the map when it is empty.
	RequestsByKind map[Kind]int `json:"requests_by_kind,omitempty"`
	ErrorsByKind   map[Kind]int `json:"errors_by_kind,omitempty"`
	// Rate limits: the worst admitted/limit ratio over keys and windows.
	Overshoot float64 `json:"overshoot"`
	// Notifications: accepted but never terminal or never delivered,
	// deliveries seen more than once, per-user order violations, and the
	// OTP accept-to-delivery p99 and maximum.
	Lost            int           `json:"lost"`
	Duplicated      int           `json:"duplicated"`
	OrderViolations int           `json:"order_violations"`
	OTPp99          time.Duration `json:"otp_p99_ns"`
	OTPMax          time.Duration `json:"otp_max_ns"`
	// Links: redirects of existing codes that were not 302, and clicks
	// missing against redirects made.
	BadRedirects  int   `json:"bad_redirects"`
	MissingClicks int64 `json:"missing_clicks"`
}

// Summary is the checkers' verdict on a history: a row per fault, and the
// violations of a promise (each a sentence naming the fault and the
// numbers); a run passes when Violations is empty.
type Summary struct {
	Seed       int64    `json:"seed"`
	Rows       []Row    `json:"rows"`
	Violations []string `json:"violations"`
}
