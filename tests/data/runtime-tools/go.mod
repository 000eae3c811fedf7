module github.com/opencontainers/runtime-tools

go 1.26.0

require (
	github.com/blang/semver v3.5.0+incompatible
	github.com/hashicorp/go-multierror v1.0.0
	github.com/mndrix/tap-go v0.0.0-20171203230836-629fa407e90b
	github.com/mrunalp/fileutils v0.5.1
	github.com/opencontainers/runtime-spec v1.0.2
	github.com/opencontainers/selinux v1.6.0
	github.com/satori/go.uuid v1.1.0
	github.com/sirupsen/logrus v1.0.6
	github.com/stretchr/testify v1.12.1
	github.com/syndtr/gocapability v0.0.0-20200815063812-42c35b437635
	github.com/urfave/cli v1.19.1
	github.com/xeipuuv/gojsonschema v1.2.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/cyphar/filepath-securejoin v0.5.1 // indirect
	github.com/hashicorp/errwrap v1.0.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/xeipuuv/gojsonpointer v0.0.0-20180127040702-4e3ac2762d5f // indirect
	github.com/xeipuuv/gojsonreference v0.0.0-20180127040603-bd5ef7bd5415 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/term v0.48.0 // indirect
	gopkg.in/airbrake/gobrake.v2 v2.0.9 // indirect
	gopkg.in/gemnasium/logrus-airbrake-hook.v2 v2.1.2 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)
