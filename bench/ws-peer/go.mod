module stampede.bench/ws-peer

go 1.26

require github.com/gorilla/websocket v1.5.3
