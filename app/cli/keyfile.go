package cli

import "github.com/rxgate/rxgate/config"

// readKey reads the encryption key in the file at path, naming the
// setting or flag it came from (setting) in its errors; an empty path is
// no key (an unencrypted store).
func readKey(setting, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	return config.ReadKeyFile(setting, path)
}
