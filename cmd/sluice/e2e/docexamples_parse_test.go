package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The shell examples of README.md and docs/*.md, and how TestDocExamples
// reads them (the convention a doc follows so that its examples run):
//
//   - A fenced block whose info string is `sh` runs. Each of its command
//     lines is one step, run in order by bash on a node of the doc's own;
//     a trailing backslash, or a single quote left open, continues the
//     command on the next line.
//   - A step's answer is the comment after it on its line
//     (`curl ... # 200 {...}`), or the comment lines right below it that
//     start with "#" and at least two spaces (`#   202 {...}`), or, for the
//     last step of a block, a ```json or ```http block (or a bare ```
//     block) that follows with nothing but blank lines between. A comment
//     line with one space after "#" (`# Rate limiting`) is a heading.
//   - An answer may open with the HTTP status (`201 ...`, or the status
//     line of an http block, whose header lines must then be in the
//     response too) or with `exit N` for a sluice command. Every
//     "name":value pair it shows must be in the answer's JSON at some
//     depth; a value with "..." or "…" in it, an RFC 3339 time, a list or
//     an object need only be there. Other text is commentary.
//   - A step without a status must succeed: curl 2xx or 3xx, a command
//     exit 0. No step may answer 401 or 5xx.
//   - `<name>` in a command is the string field `name` of the latest
//     answer that had one (at its top level, or in the first of its
//     `items`), or a query parameter of its Location header
//     (`<sluice_cid>`); `export NAME=sk_...` takes the answers' longest
//     value starting with `sk_`. A bare HTML tag (`<p>`, `<b>`) no answer
//     named stays as it is.
//   - localhost:8080 and 127.0.0.1:8080 are the node's HTTP address and
//     127.0.0.1:8081 its gRPC address, in commands and answers;
//     `go run ./cmd/sluice` and `bin/sluice` are the built binary (`make build`
//     is skipped); $SLUICE_API_KEY is an
//     admin key (docs that say their examples need no key run on a node
//     that has none), and $K is "Authorization: Bearer $SLUICE_API_KEY".
//   - A read (a curl GET of /v1/..., a sluice get, list or stats) whose
//     answer does not hold yet is asked again for a few seconds:
//     deliveries and clicks are asynchronous.
//   - In a table, an inline `curl ...` span is a step too, and a span
//     after it behind an arrow is its answer: `curl ...` → `204`.
//   - ```sh norun: <why> marks a block that is not run because it needs
//     what a test node lacks (Envoy, an SMTP relay, a second node, a
//     cloud); the reason is required. Commands are not written in
//     indented blocks or other fences, so that none escapes the test.

// docStep is one command of a doc's sh blocks and the answer it shows.
type docStep struct {
	line   int    // where the command starts in its file
	cmd    string // continued lines joined
	answer string // the comment's text, or the following block's
	http   bool   // answer is an http block: status line, headers, body
}

// docFile is one Markdown file's examples: the steps to run in order, the
// blocks marked norun (by line, with the reason), and what breaks the
// convention.
type docFile struct {
	path     string
	steps    []docStep
	norun    map[int]string
	problems []string
}

var (
	// fence opens or closes a fenced block, possibly indented (in a list).
	fence = regexp.MustCompile("^( *)```(.*)$")
	// indentedCommand is a command written in an indented code block.
	indentedCommand = regexp.MustCompile(`^    (\$ |curl |sluice |grpcurl )`)
	// answerLine continues the answer of the command above it.
	answerLine = regexp.MustCompile(`^#  `)
	// headingLikeAnswer is an answer written as a heading, "# {...}".
	headingLikeAnswer = regexp.MustCompile(`^# (\{|\[|\d{3}\b)`)
)

// parseDoc reads path's examples.
func parseDoc(path string) (*docFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &docParser{docFile: docFile{path: path, norun: map[int]string{}}, answerOf: -1, prevBlank: true}
	for i, raw := range strings.Split(string(b), "\n") {
		switch m := fence.FindStringSubmatch(raw); {
		case m != nil && !p.inFence:
			p.open(i+1, m[1], strings.TrimSpace(m[2]))
		case m != nil && strings.TrimSpace(m[2]) == "":
			p.close()
		case p.inFence:
			p.blockLine(i+1, strings.TrimPrefix(raw, p.indent))
		default:
			p.proseLine(i+1, raw)
		}
	}
	// Split each step's inline answer from its command.
	for i := range p.steps {
		s := &p.steps[i]
		cmd, comment := splitComment(strings.ReplaceAll(s.cmd, "\\\n", " "))
		s.cmd = strings.TrimSpace(cmd)
		s.answer = strings.TrimSpace(comment + " " + s.answer)
	}
	return &p.docFile, nil
}

// docParser is parseDoc's state between two lines.
type docParser struct {
	docFile
	inFence    bool
	indent     string   // of the open fence's lines (a block in a list)
	info       string   // the open fence's info string
	blockStart int      // the open fence's line
	answerOf   int      // the step a following answer block belongs to, or -1
	answerBuf  []string // the lines of an answer block, while one is open
	pending    []string // a command's lines while it goes on
	pendingAt  int      // its first line
	prevBlank  bool
}

func (p *docParser) problem(line int, format string, args ...any) {
	p.problems = append(p.problems, fmt.Sprintf("%s:%d: %s", filepath.Base(p.path), line, fmt.Sprintf(format, args...)))
}

// open starts a fenced block: an answer block right after a sh block, a
// sh block, or another.
func (p *docParser) open(line int, indent, info string) {
	p.inFence, p.indent, p.info, p.blockStart = true, indent, info, line
	if p.answerOf >= 0 && (info == "json" || info == "http" || info == "") {
		p.answerBuf = []string{}
	} else {
		p.answerOf = -1
	}
	p.checkInfo(info, line)
}

// close ends the open block: a sh block's last step may take the next
// block as its answer; an answer block gives it.
func (p *docParser) close() {
	p.inFence = false
	switch {
	case p.info == "sh":
		if p.pending != nil {
			p.problem(p.pendingAt, "command not ended (an unbalanced quote or a trailing backslash)")
			p.pending = nil
		}
		p.answerOf = len(p.steps) - 1
		if p.answerOf >= 0 && p.steps[p.answerOf].line < p.blockStart {
			p.answerOf = -1 // a block without commands answers nothing
		}
	case p.answerBuf != nil:
		s := &p.steps[p.answerOf]
		text := strings.TrimSpace(strings.Join(p.answerBuf, "\n"))
		s.answer = strings.TrimSpace(s.answer + "\n" + text)
		s.http = strings.HasPrefix(text, "HTTP/")
		p.answerOf, p.answerBuf = -1, nil
	default:
		p.answerOf = -1
	}
}

// blockLine reads a line of the open block: an answer's, or a sh block's
// command, answer comment or heading.
func (p *docParser) blockLine(n int, line string) {
	switch {
	case p.answerBuf != nil:
		p.answerBuf = append(p.answerBuf, line)
		return
	case p.info != "sh":
		return
	case p.pending != nil:
		p.pending = append(p.pending, line)
		p.flush()
		return
	}
	trimmed := strings.TrimSpace(line)
	switch {
	case trimmed == "":
	case headingLikeAnswer.MatchString(trimmed):
		p.problem(n, "an answer on a comment line of one space reads as a heading: write it as #   %s", strings.TrimSpace(trimmed[1:]))
	case strings.HasPrefix(trimmed, "#"):
		if last := len(p.steps) - 1; answerLine.MatchString(trimmed) && last >= 0 && p.steps[last].line > p.blockStart {
			p.steps[last].answer = strings.TrimSpace(p.steps[last].answer + " " + strings.TrimSpace(trimmed[1:]))
		}
	default:
		p.pending, p.pendingAt = []string{line}, n
		p.flush()
	}
}

// flush makes the pending command a step once it no longer goes on.
func (p *docParser) flush() {
	if continues(p.pending) {
		return
	}
	p.steps = append(p.steps, docStep{line: p.pendingAt, cmd: strings.Join(p.pending, "\n")})
	p.pending = nil
}

// proseLine reads a line outside any block: a table row's examples, or a
// command left in an indented block.
func (p *docParser) proseLine(n int, raw string) {
	if strings.TrimSpace(raw) != "" {
		p.answerOf = -1
	}
	if strings.HasPrefix(raw, "|") {
		p.steps = append(p.steps, tableSteps(raw, n)...)
	}
	// benchmarks.md keeps its recipes indented: long runs, made by hand
	// on a quiet machine, none a reader's first steps.
	if p.prevBlank && indentedCommand.MatchString(raw) && filepath.Base(p.path) != "benchmarks.md" {
		p.problem(n, "a command in an indented block: write it in a ```sh block (or ```sh norun: why) so the test runs it")
	}
	p.prevBlank = strings.TrimSpace(raw) == ""
}

// tableSpan is an inline code span of a table row, and the answer
// span that may follow it: `curl ...` → `204`.
var tableSpan = regexp.MustCompile("`(curl [^`]+)`(?:\\s*→\\s*`([^`]+)`)?")

// tableSteps returns the curl examples of a table row, as steps (a
// table's cells escape | as \|).
func tableSteps(row string, line int) []docStep {
	var steps []docStep
	for _, m := range tableSpan.FindAllStringSubmatch(row, -1) {
		steps = append(steps, docStep{line: line, cmd: strings.ReplaceAll(m[1], `\|`, "|"), answer: m[2]})
	}
	return steps
}

// checkInfo records a norun block's reason, or a problem for a shell
// block that is neither runnable nor marked.
func (p *docParser) checkInfo(info string, line int) {
	lang, rest, _ := strings.Cut(info, " ")
	switch {
	case lang == "sh" && rest == "":
	case lang == "sh" && strings.HasPrefix(rest, "norun"):
		why := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(rest, "norun"), ":"))
		if why == "" {
			p.problem(line, "```sh norun needs its reason: ```sh norun: needs an SMTP relay")
		}
		p.norun[line] = why
	case lang == "sh":
		p.problem(line, "unknown info string %q: ```sh or ```sh norun: why", info)
	case lang == "bash" || lang == "shell" || lang == "console" || lang == "zsh":
		p.problem(line, "```%s: write ```sh (or ```sh norun: why) so the test runs it", lang)
	}
}

// continues reports whether a command of these lines goes on: a trailing
// backslash or a single quote still open.
func continues(lines []string) bool {
	last := lines[len(lines)-1]
	if strings.HasSuffix(last, "\\") {
		return true
	}
	_, open := scanQuotes(strings.Join(lines, "\n"))
	return open
}

// splitComment cuts a command at its comment: a " #" outside quotes.
func splitComment(cmd string) (code, comment string) {
	at, _ := scanQuotes(cmd)
	if at < 0 {
		return cmd, ""
	}
	return cmd[:at], strings.TrimSpace(cmd[at+2:])
}

// scanQuotes returns where cmd's comment starts (-1 for none) and whether
// a quote is left open at its end.
func scanQuotes(cmd string) (comment int, open bool) {
	var quote byte
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\\':
			i++
		case c == '#' && i > 0 && (cmd[i-1] == ' ' || cmd[i-1] == '\t'):
			return i - 1, false
		}
	}
	return -1, quote != 0
}
