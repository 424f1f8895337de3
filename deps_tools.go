//go:build tools

// Package airlock pins modules the platform adapters are being built on.
package airlock

import (
	_ "github.com/bwmarrin/discordgo"
	_ "github.com/gorilla/websocket"
	_ "github.com/slack-go/slack"
	_ "github.com/slack-go/slack/socketmode"
)
