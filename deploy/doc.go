// Package deploy holds what installs and runs Airlock outside `go run`: the
// Kubernetes manifests in deploy/kubernetes, and tests that keep them, the
// repository's Dockerfile and .dockerignore, and the Docker instructions
// of docs/deploy.md consistent with each other and with the config's
// defaults, and every relative link of README.md and docs/ resolving.
// It has no code of its own.
package deploy
