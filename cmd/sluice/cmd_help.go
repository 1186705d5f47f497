package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// Every command parses its flags the same way: flags may come before or
// after the positional arguments (parseFlags), and -h prints one help
// format (setUsage): the usage line, what the command does, and the
// command's own flags with their value types.

// setUsage makes fs's help "Usage: sluice <usage>", about, and the flags:
// only those named in own when any are (a command that also accepts every
// serve flag shows its own), every flag of fs otherwise.
func setUsage(fs *flag.FlagSet, usage, about string, own ...string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: sluice %s\n", usage)
		if about != "" {
			fmt.Fprintf(w, "\n%s\n", about)
		}
		printFlags(w, fs, own)
		if len(own) > 0 {
			fmt.Fprintln(w, "\nIt also accepts every flag of `sluice serve` (sluice help serve), so it can share serve's command line.")
		}
	}
}

// printFlags lists fs's flags (those in own, when not empty) as
// "--name type" followed by their usage.
func printFlags(w io.Writer, fs *flag.FlagSet, own []string) {
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if len(own) > 0 && !slices.Contains(own, f.Name) {
			return
		}
		if first {
			fmt.Fprintln(w, "\nFlags:")
			first = false
		}
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name
		}
		if t := flagType(f); t != "" {
			line += " " + t
		}
		usage := strings.ReplaceAll(f.Usage, "\n", "\n    \t")
		if !slices.Contains([]string{"", "0", "false", "0s", "[]", "map[]"}, f.DefValue) && !strings.Contains(usage, "default") {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, usage)
	})
}

// flagType is the placeholder of f's value: its Type() when it has one,
// else the kind of the standard flag ("" for a boolean flag).
func flagType(f *flag.Flag) string {
	if t, ok := f.Value.(interface{ Type() string }); ok {
		if t.Type() == "bool" {
			return ""
		}
		return t.Type()
	}
	if isBoolFlag(f) {
		return ""
	}
	// *flag.stringValue, *flag.durationValue, *flag.int64Value...
	kind := strings.TrimSuffix(strings.TrimPrefix(reflect.TypeOf(f.Value).String(), "*flag."), "Value")
	switch kind {
	case "int64", "uint", "uint64":
		return "int"
	case "float64":
		return "float"
	case "string", "duration", "int":
		return kind
	}
	return "value"
}

// parseFlags parses args, flags before or after the positional ones, and
// returns the positional ones. Help asked for (-h) goes to help, whatever
// fs's output, so `sluice CMD -h | less` works; usage after a bad flag
// goes to fs's output (stderr).
func parseFlags(help io.Writer, fs *flag.FlagSet, args []string) ([]string, error) {
	if c, ok := help.(*flagCapture); ok { // commandFlags asks: hand fs over, run nothing
		c.fs = fs
		return nil, flag.ErrHelp
	}
	out := fs.Output()
	fs.SetOutput(io.Discard) // the error is printed once, by run
	err := fs.Parse(interleaved(fs, args))
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(help)
		fs.Usage()
		fs.SetOutput(out)
		return nil, err
	case err != nil:
		fs.Usage()
		return nil, err
	}
	return fs.Args(), nil
}

// parseArgs is parseFlags that also checks that exactly the named
// positional arguments are given.
func parseArgs(env *environment, fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	pos, err := parseFlags(env.stdout, fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(names) {
		fs.Usage()
		if len(names) == 0 {
			return nil, errors.New("want no arguments")
		}
		return nil, fmt.Errorf("want %s", strings.Join(names, " "))
	}
	return pos, nil
}

// interleaved moves the flags among args in front of the positional ones,
// so `sluice shorten URL --slug x` works as users expect; "--" ends the
// flags.
func interleaved(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimPrefix(a[1:], "-")
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && !strings.Contains(name, "=") && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
			continue
		}
		pos = append(pos, a)
	}
	if len(pos) > 0 {
		flags = append(flags, "--")
	}
	return append(flags, pos...)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
