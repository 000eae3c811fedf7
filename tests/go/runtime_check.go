// A Go program exercising what the Go runtime asks of a kernel: threads
// for goroutines, futexes, timers, the netpoller (epoll and eventfd) over
// pipes, and fork+exec with captured output. It prints the same lines
// wherever it runs.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	squares := []int{}
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			time.Sleep(time.Duration(i%4) * time.Millisecond)
			mu.Lock()
			squares = append(squares, i*i)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	sort.Ints(squares)
	fmt.Println("squares", squares)

	ch := make(chan string)
	go func() { ch <- "pong" }()
	select {
	case m := <-ch:
		fmt.Println("channel", m)
	case <-time.After(10 * time.Second):
		fmt.Println("channel timed out")
	}

	for i := 0; i < 3; i++ {
		out, err := exec.Command("/bin/sh", "-c", fmt.Sprintf("echo child %d; echo to stderr >&2", i)).Output()
		fmt.Printf("exec %q %v\n", strings.TrimSpace(string(out)), err)
	}
	err := exec.Command("/bin/sh", "-c", "exit 3").Run()
	fmt.Println("exit status:", err)

	r, w, _ := os.Pipe()
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.Write([]byte("through a pipe"))
		w.Close()
	}()
	buf := make([]byte, 64)
	n, _ := r.Read(buf)
	fmt.Println("pipe", string(buf[:n]))

	b, err := os.ReadFile("/etc/passwd")
	fmt.Println("read /etc/passwd", len(b) > 0, err)
}
