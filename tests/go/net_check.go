// A Go program exercising what Go's net and os/exec packages ask of a
// kernel: an HTTP server and client on loopback (TCP over IPv4 and IPv6),
// a unix socket listener, UDP, and child processes with piped stdio. It
// prints the same lines wherever it runs.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

func check(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func httpServerAndClient(network, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s over %s", r.URL.Query().Get("name"), r.Proto)
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s received %d bytes, err %v", r.Method, n, err)
	})
	ln, err := net.Listen(network, addr)
	check("listen "+network, err)
	port := ln.Addr().(*net.TCPAddr).Port
	fmt.Println(network, "listening on an ephemeral port:", port >= 1024)
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Get(base + "/hello?name=gopher")
	check("get", err)
	body, err := io.ReadAll(resp.Body)
	check("read body", err)
	resp.Body.Close()
	fmt.Printf("GET %d %q %s\n", resp.StatusCode, body, resp.Header.Get("Content-Type"))

	resp, err = client.Post(base+"/upload", "application/octet-stream", strings.NewReader(strings.Repeat("z", 1<<20)))
	check("post", err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("POST %d %q\n", resp.StatusCode, body)

	resp, err = client.Get(base + "/missing")
	check("get", err)
	resp.Body.Close()
	fmt.Println("GET /missing", resp.StatusCode)

	var wg sync.WaitGroup
	got := make([]string, 10)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := client.Get(fmt.Sprintf("%s/hello?name=%d", base, i))
			check("parallel get", err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got[i] = string(b)
		}(i)
	}
	wg.Wait()
	fmt.Println("parallel", strings.Join(got, "; "))

	check("shutdown", srv.Close())
	fmt.Println("served:", <-served)
	_, err = net.Dial(network, ln.Addr().String())
	fmt.Println("dial after close refused:", errors.Is(err, syscall.ECONNREFUSED))
}

func unixSocket() {
	dir, err := os.MkdirTemp("", "net-check-")
	check("mkdtemp", err)
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", path)
	check("listen unix", err)
	fi, err := os.Stat(path)
	check("stat socket", err)
	fmt.Println("unix socket node:", fi.Mode()&os.ModeSocket != 0)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					fmt.Fprintf(c, "echo: %s\n", s.Text())
				}
			}()
		}
	}()
	c, err := net.Dial("unix", path)
	check("dial unix", err)
	r := bufio.NewReader(c)
	for _, m := range []string{"one", "two", "three"} {
		fmt.Fprintln(c, m)
		line, err := r.ReadString('\n')
		check("read", err)
		fmt.Print("unix ", line)
	}
	c.(*net.UnixConn).CloseWrite()
	rest, err := io.ReadAll(r)
	fmt.Printf("unix after half-close: %q %v\n", rest, err)
	c.Close()
	ln.Close()
	_, err = os.Stat(path)
	fmt.Println("socket node removed on close:", os.IsNotExist(err))
}

func udp() {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	check("listen udp", err)
	defer pc.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(strings.ToUpper(string(buf[:n]))), addr)
		}
	}()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	check("dial udp", err)
	defer c.Close()
	buf := make([]byte, 1500)
	for _, m := range []string{"datagram one", "datagram two"} {
		_, err := c.Write([]byte(m))
		check("write udp", err)
		n, err := c.Read(buf)
		check("read udp", err)
		fmt.Printf("udp %q\n", buf[:n])
	}
}

func execWithPipes() {
	cmd := exec.Command("tr", "a-z", "A-Z")
	stdin, err := cmd.StdinPipe()
	check("stdin pipe", err)
	stdout, err := cmd.StdoutPipe()
	check("stdout pipe", err)
	check("start tr", cmd.Start())
	go func() {
		for i := 0; i < 1000; i++ {
			fmt.Fprintf(stdin, "line %d through a pipe\n", i)
		}
		stdin.Close()
	}()
	lines := 0
	last := ""
	s := bufio.NewScanner(stdout)
	for s.Scan() {
		lines++
		last = s.Text()
	}
	fmt.Println("exec tr:", lines, last, cmd.Wait())

	out, err := exec.Command("sh", "-c", "echo out; echo err >&2; exit 2").CombinedOutput()
	fmt.Printf("exec combined %q %v\n", out, err)

	// A pipeline: seq | sort -r | head -3, wired with os.Pipe.
	seq := exec.Command("seq", "1", "20")
	sortr := exec.Command("sort", "-n", "-r")
	head := exec.Command("head", "-3")
	r1, w1, err := os.Pipe()
	check("pipe", err)
	r2, w2, err := os.Pipe()
	check("pipe", err)
	seq.Stdout, sortr.Stdin, sortr.Stdout, head.Stdin = w1, r1, w2, r2
	var result strings.Builder
	head.Stdout = &result
	for _, c := range []*exec.Cmd{seq, sortr, head} {
		check("start", c.Start())
	}
	for _, f := range []*os.File{r1, w1, r2, w2} {
		f.Close()
	}
	errs := []string{}
	for _, c := range []*exec.Cmd{seq, sortr, head} {
		errs = append(errs, fmt.Sprint(c.Wait()))
	}
	sort.Strings(errs)
	fmt.Printf("pipeline %q %v\n", result.String(), errs)
}

func main() {
	httpServerAndClient("tcp4", "127.0.0.1:0")
	httpServerAndClient("tcp6", "[::1]:0")
	unixSocket()
	udp()
	execWithPipes()
}
