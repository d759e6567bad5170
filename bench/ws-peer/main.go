// The WebSocket echo peer of bench/grpc.sh: N connections, each sending a text message and
// waiting for its echo in a loop for D seconds (gorilla/websocket, the Go ecosystem's usual
// client). Prints the messages sent and received, as `sent N received M errors E`.
package main

import (
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	url := flag.String("url", "ws://127.0.0.1:8080/ws/echo", "echo endpoint (loopback)")
	conns := flag.Int("c", 50, "connections")
	secs := flag.Int("d", 10, "seconds")
	flag.Parse()
	var sent, received, errors atomic.Int64
	deadline := time.Now().Add(time.Duration(*secs) * time.Second)
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := websocket.DefaultDialer.Dial(*url, nil)
			if err != nil {
				errors.Add(1)
				return
			}
			defer c.Close()
			msg := []byte("hello")
			for time.Now().Before(deadline) {
				if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
					errors.Add(1)
					return
				}
				sent.Add(1)
				if _, _, err := c.ReadMessage(); err != nil {
					errors.Add(1)
					return
				}
				received.Add(1)
			}
			_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		}()
	}
	wg.Wait()
	fmt.Printf("sent %d received %d errors %d\n", sent.Load(), received.Load(), errors.Load())
}
