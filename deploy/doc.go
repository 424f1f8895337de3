// Package deploy holds what installs and runs Airlock outside `go run`: the
// Kubernetes manifests in deploy/kubernetes, and tests that keep them, the
// repository's Dockerfile and .dockerignore, and the README's Docker
// instructions consistent with each other and with the config's defaults.
// It has no code of its own.
package deploy
