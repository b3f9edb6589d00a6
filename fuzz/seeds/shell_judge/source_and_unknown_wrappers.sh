source <(echo 'rm x'); . ./env.sh; flock /tmp/l rm y; flock f -c 'rm z'; sg root -c 'rm q'; lockrun rm w
