package workflow

// Step is one step of a definition.
type Step struct {
	Name string
	Kind string
}
