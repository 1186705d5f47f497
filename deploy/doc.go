// Package deploy holds the recipes that run Sluice outside a developer's
// shell, and the tests that keep them true without a Docker engine or a
// Kubernetes cluster: the Dockerfile (its exact go build line is run),
// docker-compose.yaml (its services and SLUICE_* variables are checked
// against the real flags), the Helm chart under helm/sluice (linted and
// rendered with helm, its manifests parsed, its config loaded by Sluice's
// own loader), and the systemd unit under systemd/ (systemd-analyze
// verify). docs/deploy.md explains them.
package deploy
